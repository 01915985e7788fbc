#include "cohort/comm/algorithms/exec.h"

#include <algorithm>

#include "cohort/comm/reduce.h"

namespace cohort::comm {

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kHalvingDoubling:
      return "halving_doubling";
    case Algorithm::kDissemination:
      return "dissemination";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kSharedBuffers:
      return "shared_buffers";
  }
  return "?";
}

const char* op_code_name(OpCode op) {
  switch (op) {
    case OpCode::kAllreduce:
      return "allreduce";
    case OpCode::kBroadcast:
      return "broadcast";
    case OpCode::kReduce:
      return "reduce";
    case OpCode::kAllgather:
      return "allgather";
    case OpCode::kAllgatherv:
      return "allgatherv";
    case OpCode::kReduceScatter:
      return "reduce_scatter";
    case OpCode::kBarrier:
      return "barrier";
    case OpCode::kGather:
      return "gather";
    case OpCode::kScatter:
      return "scatter";
    case OpCode::kAlltoall:
      return "alltoall";
    case OpCode::kSendRecv:
      return "send/recv";
  }
  return "?";
}

uint64_t Signature::info0() const {
  return uint64_t(op) | uint64_t(dtype) << 8 | uint64_t(reduce_op) << 16 |
         uint64_t(algorithm) << 24 | uint64_t(uint32_t(root + 1)) << 32;
}

Signature Signature::decode(const transport::Header& h) {
  Signature s;
  uint64_t v = h.info[0];
  s.op = OpCode(v & 0xff);
  s.dtype = DType((v >> 8) & 0xff);
  s.reduce_op = ReduceOp((v >> 16) & 0xff);
  s.algorithm = Algorithm((v >> 24) & 0xff);
  s.root = int(uint32_t(v >> 32)) - 1;
  s.count = h.info[1];
  return s;
}

std::string Signature::describe() const {
  bool reduces = op == OpCode::kAllreduce || op == OpCode::kReduce || op == OpCode::kReduceScatter;
  bool rooted = op == OpCode::kBroadcast || op == OpCode::kReduce || op == OpCode::kGather ||
                op == OpCode::kScatter;
  std::string out = detail::str(op_code_name(op), "(count=", count, ", ", dtype_short_name(dtype));
  if (reduces) out += detail::str(", ", reduce_op_name(reduce_op));
  if (rooted) out += detail::str(", root ", root);
  if (op == OpCode::kSendRecv)
    out = detail::str("send/recv(count=", count, ", ", dtype_short_name(dtype), ", tag ", root);
  return out + detail::str(", ", algorithm_name(algorithm), ")");
}

Exec::Exec(transport::Context& ctx, const Signature& sig, uint64_t seq,
           transport::Deadline deadline, std::vector<std::vector<char>>& scratch)
    : ctx_(ctx),
      sig_(sig),
      seq_(seq),
      deadline_(deadline),
      scratch_(scratch),
      sent_(size_t(ctx.size()), 0),
      received_(size_t(ctx.size()), 0) {}

transport::Header Exec::header(uint64_t index) const {
  return transport::Header{seq_, {sig_.info0(), sig_.count, index}};
}

void Exec::set_group(const std::vector<int>* ranks) {
  group_ = nullptr;
  if (!ranks) return;
  auto it = std::find(ranks->begin(), ranks->end(), ctx_.rank());
  COHORT_INTERNAL(it != ranks->end(), "Exec::set_group: rank ", ctx_.rank(),
                  " is not in the group of ", ranks->size(), " ranks");
  group_rank_ = int(it - ranks->begin());
  group_ = ranks;
}

transport::Request Exec::send(int peer, const void* data, size_t bytes) {
  peer = real(peer);
  return ctx_.send(peer, data, bytes, header(sent_[size_t(peer)]++));
}

transport::Request Exec::recv(int peer, void* data, size_t bytes) {
  peer = real(peer);
  return ctx_.recv(peer, data, bytes, header(received_[size_t(peer)]++));
}

transport::Request Exec::recv_reduce(int peer, void* data, size_t bytes) {
  peer = real(peer);
  transport::RecvReduce rr{sig_.dtype, sig_.reduce_op};
  return ctx_.recv(peer, data, bytes, header(received_[size_t(peer)]++), &rr);
}

transport::Request Exec::post_p2p(bool send, int peer, void* data, size_t bytes,
                                  const Signature& sig, uint64_t tag) {
  transport::Header h{tag, {sig.info0(), sig.count, 0}};
  return send ? ctx_.send(peer, data, bytes, h) : ctx_.recv(peer, data, bytes, h);
}

void Exec::combine(void* dst, const void* lhs, const void* rhs, size_t count) const {
  reduce(sig_.dtype, sig_.reduce_op, dst, lhs, rhs, count);
}

char* Exec::scratch(int slot, size_t bytes) {
  auto& s = scratch_[size_t(slot)];
  if (s.size() < bytes) s.resize(bytes);
  return s.data();
}

}  // namespace cohort::comm
