#pragma once
// Collectives: free functions over an options struct (DESIGN convention 2, after gloo).
//
//   std::vector<float> grad(n);
//   comm::allreduce(*world, {.output = grad.data(), .count = n});       // in place, f32 sum
//   comm::Work w = comm::allreduce_async(*world, {.input = x, .output = y, .count = n,
//                                                 .dtype = comm::DType::bf16,
//                                                 .op = comm::ReduceOp::avg});
//   w.wait();
//
// Buffers are raw memory of `count` elements of `dtype` (counts are per rank where noted).
// `input == nullptr` means in place (the input is read from `output`). A `timeout` of 0 takes
// the communicator's. `algorithm` kAuto picks by message size (CommOptions); a manual choice
// must be valid for the operation (InvalidArgument otherwise) and identical on every rank.
//
// Errors: InvalidArgument for bad arguments (before anything is sent); CollectiveMismatch when
// ranks disagree on the call; Timeout when a peer does not answer before the deadline; IoError
// when a peer dies or closes. Each names the operation, its sequence number and the peer.
// Results are bit-identical on every rank (see algorithms/algorithms.h).
#include <chrono>
#include <cstddef>
#include <vector>

#include "cohort/comm/communicator.h"
#include "cohort/comm/types.h"
#include "cohort/comm/work.h"

namespace cohort::comm {

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

void allreduce(Communicator& c, const AllreduceOptions& o);
void broadcast(Communicator& c, const BroadcastOptions& o);
void reduce(Communicator& c, const ReduceOptions& o);
void allgather(Communicator& c, const AllgatherOptions& o);
void allgatherv(Communicator& c, const AllgathervOptions& o);
void reduce_scatter(Communicator& c, const ReduceScatterOptions& o);
void gather(Communicator& c, const GatherOptions& o);
void scatter(Communicator& c, const ScatterOptions& o);
void alltoall(Communicator& c, const AlltoallOptions& o);
void barrier(Communicator& c, const BarrierOptions& o = {});

Work allreduce_async(Communicator& c, const AllreduceOptions& o);
Work broadcast_async(Communicator& c, const BroadcastOptions& o);
Work reduce_async(Communicator& c, const ReduceOptions& o);
Work allgather_async(Communicator& c, const AllgatherOptions& o);
Work allgatherv_async(Communicator& c, const AllgathervOptions& o);
Work reduce_scatter_async(Communicator& c, const ReduceScatterOptions& o);
Work gather_async(Communicator& c, const GatherOptions& o);
Work scatter_async(Communicator& c, const ScatterOptions& o);
Work alltoall_async(Communicator& c, const AlltoallOptions& o);
Work barrier_async(Communicator& c, const BarrierOptions& o = {});

// Point-to-point. The n-th send from A to B is matched with the n-th recv on B from A; count,
// dtype and tag must agree (else CollectiveMismatch). Collectives and point-to-point messages
// between two ranks must be issued in the same relative order on both. A send completes when
// its data is in the transport's buffer (1 MiB shm ring, socket buffers), so two ranks that
// both send large messages before receiving must use batch_send_recv.
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
void send(Communicator& c, const SendOptions& o);
void recv(Communicator& c, const RecvOptions& o);
Work send_async(Communicator& c, const SendOptions& o);
Work recv_async(Communicator& c, const RecvOptions& o);

// Several sends and receives posted together and completed together (like
// torch.distributed.batch_isend_irecv): the way to exchange messages of any size with peers
// that also send to us, since separately issued operations run one after another.
struct P2POp {
  enum Kind : uint8_t { kSend, kRecv };
  Kind kind = kSend;
  void* buffer = nullptr;  // read for kSend, written for kRecv
  size_t count = 0;
  DType dtype = DType::f32;
  int peer = 0;
  uint32_t tag = 0;
};
void batch_send_recv(Communicator& c, const std::vector<P2POp>& ops, milliseconds timeout = {});
Work batch_send_recv_async(Communicator& c, const std::vector<P2POp>& ops,
                           milliseconds timeout = {});

// The algorithm kAuto resolves to for an allreduce of `bytes` (exposed for tests and tools).
Algorithm choose_allreduce_algorithm(const Communicator& c, size_t bytes);

}  // namespace cohort::comm
