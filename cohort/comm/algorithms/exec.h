#pragma once
// Exec: what one running collective gives its algorithm: the transport context, the
// collective's signature and sequence number, its deadline, and scratch memory.
//
// Every message carries a transport::Header built from the signature:
//   tag      the collective's sequence number on this communicator
//   info[0]  op | dtype << 8 | reduce op << 16 | algorithm << 24 | (root + 1) << 32
//   info[1]  element count
//   info[2]  index of the message on this pair within the collective
// so a rank that called another collective (or the same one with other arguments) fails at
// the first message it receives, and run_collective() turns that into an error naming both.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/comm/options.h"
#include "cohort/comm/transport/context.h"
#include "cohort/comm/types.h"

namespace cohort::comm {

enum class OpCode : uint8_t {
  kAllreduce = 1,
  kBroadcast,
  kReduce,
  kAllgather,
  kAllgatherv,
  kReduceScatter,
  kBarrier,
  kGather,
  kScatter,
  kAlltoall,
  kSendRecv,
};
const char* op_code_name(OpCode op);

// What every rank must agree on for a collective.
struct Signature {
  OpCode op = OpCode::kBarrier;
  DType dtype = DType::u8;
  ReduceOp reduce_op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::kAuto;
  int root = -1;
  uint64_t count = 0;

  uint64_t info0() const;
  static Signature decode(const transport::Header& h);
  // "allreduce(count=1009, f32, sum, ring)"; root and reduce op only where they apply.
  std::string describe() const;
};

class Exec {
 public:
  Exec(transport::Context& ctx, const Signature& sig, uint64_t seq, transport::Deadline deadline,
       std::vector<std::vector<char>>& scratch);

  // With a group set (set_group), rank(), size() and the peers of send/recv are positions in
  // that group; otherwise ranks of the communicator.
  int rank() const { return group_ ? group_rank_ : ctx_.rank(); }
  int size() const { return group_ ? int(group_->size()) : ctx_.size(); }
  // Runs the following steps on a subset of the communicator (hierarchical algorithms run the
  // flat ones on a host's ranks, then on the host leaders). `ranks` must contain this rank and
  // outlive the group; nullptr restores the whole communicator. Message counters stay per
  // real peer, so headers still match across phases.
  void set_group(const std::vector<int>* ranks);
  const Signature& sig() const { return sig_; }
  size_t elem() const { return dtype_size(sig_.dtype); }

  transport::Request send(int peer, const void* data, size_t bytes);
  transport::Request recv(int peer, void* data, size_t bytes);
  // Folds incoming elements in: data[i] = incoming[i] op data[i].
  transport::Request recv_reduce(int peer, void* data, size_t bytes);
  // A message with its own signature and tag (point-to-point batches: every message of the
  // batch is matched on its own pair with its own count, dtype and sequence number).
  transport::Request post_p2p(bool send, int peer, void* data, size_t bytes, const Signature& sig,
                              uint64_t tag);
  void wait(transport::Request& r) { r.wait(deadline_); }
  void wait_all(std::vector<transport::Request>& rs) { ctx_.wait_all(rs, deadline_); }
  // dst = lhs op rhs over `count` elements of the collective's dtype.
  void combine(void* dst, const void* lhs, const void* rhs, size_t count) const;

  // The shared arenas (transport/shm/shm_arena.h): this rank's and a peer's as mapped here.
  const transport::ShmArena* own_arena() const { return ctx_.arena().get(); }
  const transport::ShmArena* peer_arena(int peer) const { return ctx_.peer_arena(real(peer)); }
  bool peer_left(int peer) const { return ctx_.peer_left(real(peer)); }
  // Counts bytes that moved through shared memory without a message (read straight out of a
  // peer's arena, and of ours by peers) in the traffic metrics, beside the transport's.
  void count_shared_traffic(uint64_t read_from_peers, uint64_t read_by_peers) {
    ctx_.count_shared_traffic(read_from_peers, read_by_peers);
  }

  // Scratch memory owned by the communicator (reused across collectives). Slots 0 and 1.
  char* scratch(int slot, size_t bytes);

 private:
  transport::Header header(uint64_t index) const;
  int real(int peer) const { return group_ ? (*group_)[size_t(peer)] : peer; }

  transport::Context& ctx_;
  Signature sig_;
  uint64_t seq_;
  transport::Deadline deadline_;
  std::vector<std::vector<char>>& scratch_;
  std::vector<uint64_t> sent_, received_;  // per peer: messages of this collective so far
  const std::vector<int>* group_ = nullptr;
  int group_rank_ = 0;
};

}  // namespace cohort::comm
