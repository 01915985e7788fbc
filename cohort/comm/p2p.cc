// Point-to-point messages, matched per pair in issue order (see collectives.h). Each message's
// header tag is its pair's p2p counter (high bit set, so it never equals a collective's
// sequence number) and its signature carries count, dtype and the user tag (in the root
// field). send/recv are batches of one.
#include <cstring>

#include "cohort/comm/collectives.h"
#include "cohort/comm/collectives_internal.h"

namespace cohort::comm {

using namespace internal;

namespace {

struct Posted {
  P2POp op;
  Signature sig;
  uint64_t tag;
};

Communicator::Op batch_op(Communicator& c, const std::vector<P2POp>& ops, milliseconds timeout) {
  COHORT_CHECK_ARG(!ops.empty(), "batch_send_recv on rank ", c.rank(), ": no operations");
  std::vector<Posted> posted;
  for (const P2POp& p : ops) {
    const char* what = p.kind == P2POp::kSend ? "send" : "recv";
    check_common(what, c, p.dtype, p.count, p.buffer, "buffer");
    COHORT_CHECK_ARG(p.peer >= 0 && p.peer < c.size() && p.peer != c.rank(), what, " on rank ",
                     c.rank(), ": peer ", p.peer, " must be another rank in [0, ", c.size(), ")");
  }
  // Counters advance only once every op is known to be valid.
  for (const P2POp& p : ops) {
    auto sig = make_op(OpCode::kSendRecv, p.dtype, ReduceOp::sum, Algorithm::kDirect, int(p.tag),
                       p.count, timeout)
                   .sig;
    posted.push_back({p, sig, c.next_p2p_seq(p.peer, p.kind == P2POp::kSend)});
  }
  auto op = make_op(OpCode::kSendRecv, ops[0].dtype, ReduceOp::sum, Algorithm::kDirect,
                    int(ops[0].tag), ops[0].count, timeout);
  op.p2p = true;
  op.seq = posted[0].tag;
  const bool one = ops.size() == 1;
  op.p2p_name = !one ? "send_recv" : ops[0].kind == P2POp::kSend ? "send" : "recv";
  op.peer = one ? ops[0].peer : -1;
  op.body = [posted](Exec& ex) {
    std::vector<transport::Request> reqs;
    for (const Posted& p : posted) {
      size_t bytes = p.op.count * dtype_size(p.op.dtype);
      reqs.push_back(
          ex.post_p2p(p.op.kind == P2POp::kSend, p.op.peer, p.op.buffer, bytes, p.sig, p.tag));
    }
    ex.wait_all(reqs);
  };
  return op;
}

}  // namespace

void send(Communicator& c, const SendOptions& o) {
  c.run(batch_op(c, {as_p2p(o)}, o.timeout));
}
void recv(Communicator& c, const RecvOptions& o) {
  c.run(batch_op(c, {as_p2p(o)}, o.timeout));
}
Work send_async(Communicator& c, const SendOptions& o) {
  return c.submit(batch_op(c, {as_p2p(o)}, o.timeout));
}
Work recv_async(Communicator& c, const RecvOptions& o) {
  return c.submit(batch_op(c, {as_p2p(o)}, o.timeout));
}
void batch_send_recv(Communicator& c, const std::vector<P2POp>& ops, milliseconds timeout) {
  c.run(batch_op(c, ops, timeout));
}
Work batch_send_recv_async(Communicator& c, const std::vector<P2POp>& ops, milliseconds timeout) {
  return c.submit(batch_op(c, ops, timeout));
}

}  // namespace cohort::comm
