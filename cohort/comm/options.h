#pragma once
// The vocabulary of every communication call, shared by the native Communicator
// (collectives.h), the MPI backend and ProcessGroup (process_group.h): the options structs,
// Algorithm and CollectiveMismatch. Light on purpose: it includes no transport, no thread and
// no communicator, so headers of upper layers (parallel/, train/) that only talk through
// ProcessGroup stay cheap to include.
//
// Buffers are raw memory of `count` elements of `dtype` (counts are per rank where noted).
// `input == nullptr` means in place (the input is read from `output`). A `timeout` of 0 takes
// the communicator's. `algorithm` kAuto picks by message size; a manual choice must be valid
// for the operation (InvalidArgument otherwise) and identical on every rank.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cohort/comm/types.h"
#include "cohort/core/error.h"

namespace cohort::comm {

enum class Algorithm : uint8_t {
  kAuto = 0,
  kRing = 1,               // allreduce, reduce, broadcast (chain), allgather(v), reduce_scatter
  kRecursiveDoubling = 2,  // allreduce (small messages)
  kTree = 3,               // binomial tree: broadcast, reduce
  kDirect = 4,             // one message per peer: gather, scatter, alltoall, send/recv
  kHalvingDoubling = 5,    // allreduce: Rabenseifner (reduce-scatter by halving, allgather)
  kDissemination = 6,      // barrier
  kHierarchical = 7,       // allreduce: reduce within each host, ring among hosts, broadcast
  kSharedBuffers = 8,      // allreduce of buffers in the ranks' shared arenas: read peers in place
};
const char* algorithm_name(Algorithm a);

// Ranks called different collectives (or the same with different count, dtype, op, root or
// algorithm) at the same point. The message names both sides.
class CollectiveMismatch : public ErrorKind<CollectiveMismatch, InvalidArgument> {
 public:
  using ErrorKind::ErrorKind;
};

using std::chrono::milliseconds;

struct AllreduceOptions {
  const void* input = nullptr;  // count elements; nullptr: in place on output
  void* output = nullptr;       // count elements
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  milliseconds timeout{0};
  Algorithm algorithm = Algorithm::kAuto;  // ring, recursive_doubling, halving_doubling,
                                           // hierarchical
};

struct BroadcastOptions {
  void* buffer = nullptr;  // count elements: read on root, written elsewhere
  size_t count = 0;
  DType dtype = DType::f32;
  int root = 0;
  milliseconds timeout{0};
  Algorithm algorithm = Algorithm::kAuto;  // tree, ring (pipelined chain)
};

struct ReduceOptions {
  const void* input = nullptr;  // count elements; nullptr: in place on output (root)
  void* output = nullptr;       // count elements, on root only (ignored elsewhere)
  size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  milliseconds timeout{0};
  Algorithm algorithm = Algorithm::kAuto;  // tree, ring
};

struct AllgatherOptions {
  const void* input = nullptr;  // count elements; nullptr: already at output + rank * count
  void* output = nullptr;       // size * count elements, rank k's block at k * count
  size_t count = 0;             // per rank
  DType dtype = DType::f32;
  milliseconds timeout{0};
};

struct AllgathervOptions {
  const void* input = nullptr;  // counts[rank] elements; nullptr: already in place
  void* output = nullptr;       // sum(counts) elements, rank k's block after ranks < k
  std::vector<size_t> counts;   // per rank; identical on every rank
  DType dtype = DType::f32;
  milliseconds timeout{0};
};

struct ReduceScatterOptions {
  const void* input = nullptr;  // size * count elements; block k is reduced onto rank k
  void* output = nullptr;       // count elements
  size_t count = 0;             // per rank
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  milliseconds timeout{0};
};

struct GatherOptions {
  const void* input = nullptr;  // count elements
  void* output = nullptr;       // size * count elements, on root only
  size_t count = 0;             // per rank
  DType dtype = DType::f32;
  int root = 0;
  milliseconds timeout{0};
};

struct ScatterOptions {
  const void* input = nullptr;  // size * count elements, on root only
  void* output = nullptr;       // count elements
  size_t count = 0;             // per rank
  DType dtype = DType::f32;
  int root = 0;
  milliseconds timeout{0};
};

struct AlltoallOptions {
  const void* input = nullptr;  // size * count elements; block k goes to rank k
  void* output = nullptr;       // size * count elements; block k comes from rank k
  size_t count = 0;             // per pair of ranks
  DType dtype = DType::f32;
  milliseconds timeout{0};
};

struct BarrierOptions {
  milliseconds timeout{0};
};

// Point-to-point (see collectives.h for the matching rules).
struct SendOptions {
  const void* buffer = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  int peer = 0;
  uint32_t tag = 0;
  milliseconds timeout{0};
};
struct RecvOptions {
  void* buffer = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  int peer = 0;
  uint32_t tag = 0;
  milliseconds timeout{0};
};
// One operation of batch_send_recv (see collectives.h).
struct P2POp {
  enum Kind : uint8_t { kSend, kRecv };
  Kind kind = kSend;
  void* buffer = nullptr;  // read for kSend, written for kRecv
  size_t count = 0;
  DType dtype = DType::f32;
  int peer = 0;
  uint32_t tag = 0;
};
// send and recv are batches of one.
inline P2POp as_p2p(const SendOptions& o) {
  return {P2POp::kSend, const_cast<void*>(o.buffer), o.count, o.dtype, o.peer, o.tag};
}
inline P2POp as_p2p(const RecvOptions& o) {
  return {P2POp::kRecv, o.buffer, o.count, o.dtype, o.peer, o.tag};
}

}  // namespace cohort::comm
