// reduce_scatter, gather, scatter, alltoall, barrier and point-to-point over MPI.
#include <climits>

#include "cohort/comm/backends/mpi/mpi_internal.h"
#include "cohort/comm/reduce.h"
#include "cohort/core/error.h"

namespace cohort::comm {

namespace {

using Call = MpiCommunicator::Call;
using Op = MpiCommunicator::Op;
using namespace mpi_detail;

Op reduce_scatter_op(MpiCommunicator& c, const ReduceScatterOptions& o) {
  check_buffer("reduce_scatter", c, o.dtype, o.count * size_t(c.size()), o.input, "input");
  check_buffer("reduce_scatter", c, o.dtype, o.count, o.output, "output");
  Reduction r = reduction("reduce_scatter", o.dtype, o.op);
  return {"reduce_scatter", describe(o.count, o.dtype) + ", " + reduce_op_name(o.op), o.timeout,
          [o, r](Call& call) {
            if (o.count == 0) return;
            collective(
                call, "MPI_Reduce_scatter_block",
                [&] {
                  return MPI_Reduce_scatter_block(o.input, o.output, int(o.count), r.type, r.op,
                                                  call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Ireduce_scatter_block(o.input, o.output, int(o.count), r.type, r.op,
                                                   call.comm, q);
                });
            if (o.op == ReduceOp::avg) divide_by(o.dtype, o.output, o.count, call.size);
          }};
}

Op gather_op(MpiCommunicator& c, const GatherOptions& o) {
  check_root("gather", c, o.root);
  check_buffer("gather", c, o.dtype, o.count, o.input, "input");
  bool root = c.rank() == o.root;
  if (root) check_buffer("gather", c, o.dtype, o.count * size_t(c.size()), o.output, "output");
  MPI_Datatype type = datatype(o.dtype);
  return {"gather", describe(o.count, o.dtype) + detail::str(", root=", o.root), o.timeout,
          [o, type, root](Call& call) {
            if (o.count == 0) return;
            collective(
                call, "MPI_Gather",
                [&] {
                  return MPI_Gather(o.input, int(o.count), type, root ? o.output : nullptr,
                                    int(o.count), type, o.root, call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Igather(o.input, int(o.count), type, root ? o.output : nullptr,
                                     int(o.count), type, o.root, call.comm, q);
                });
          }};
}

Op scatter_op(MpiCommunicator& c, const ScatterOptions& o) {
  check_root("scatter", c, o.root);
  check_buffer("scatter", c, o.dtype, o.count, o.output, "output");
  bool root = c.rank() == o.root;
  if (root) check_buffer("scatter", c, o.dtype, o.count * size_t(c.size()), o.input, "input");
  MPI_Datatype type = datatype(o.dtype);
  return {"scatter", describe(o.count, o.dtype) + detail::str(", root=", o.root), o.timeout,
          [o, type, root](Call& call) {
            if (o.count == 0) return;
            collective(
                call, "MPI_Scatter",
                [&] {
                  return MPI_Scatter(root ? o.input : nullptr, int(o.count), type, o.output,
                                     int(o.count), type, o.root, call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Iscatter(root ? o.input : nullptr, int(o.count), type, o.output,
                                      int(o.count), type, o.root, call.comm, q);
                });
          }};
}

Op alltoall_op(MpiCommunicator& c, const AlltoallOptions& o) {
  check_buffer("alltoall", c, o.dtype, o.count * size_t(c.size()), o.input, "input");
  check_buffer("alltoall", c, o.dtype, o.count * size_t(c.size()), o.output, "output");
  MPI_Datatype type = datatype(o.dtype);
  return {"alltoall", describe(o.count, o.dtype), o.timeout, [o, type](Call& call) {
            if (o.count == 0) return;
            collective(
                call, "MPI_Alltoall",
                [&] {
                  return MPI_Alltoall(o.input, int(o.count), type, o.output, int(o.count), type,
                                      call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Ialltoall(o.input, int(o.count), type, o.output, int(o.count), type,
                                       call.comm, q);
                });
          }};
}

Op barrier_op(MpiCommunicator&, const BarrierOptions& o) {
  return {"barrier", "", o.timeout, [](Call& call) {
            collective(
                call, "MPI_Barrier", [&] { return MPI_Barrier(call.comm); },
                [&](MPI_Request* q) { return MPI_Ibarrier(call.comm, q); });
          }};
}

// Tags above MPI_TAG_UB (at least 32767) are refused before anything is posted.
void check_tag(const Call& call, uint32_t tag) {
  int* ub = nullptr;
  int flag = 0;
  {
    CallGuard guard;
    MPI_Comm_get_attr(call.comm, MPI_TAG_UB, &ub, &flag);
  }
  int limit = flag && ub ? *ub : 32767;
  COHORT_CHECK_ARG(tag <= uint32_t(limit), call.name, ": tag ", tag, " exceeds MPI_TAG_UB ", limit);
}

void check_p2p(const char* op, const MpiCommunicator& c, const P2POp& p) {
  check_buffer(op, c, p.dtype, p.count, p.buffer, "buffer");
  COHORT_CHECK_ARG(p.peer >= 0 && p.peer < c.size(), op, " on rank ", c.rank(), ": peer ", p.peer,
                   " is not in [0, ", c.size(), ")");
}

// Posts every send and receive, then completes them together (cancelled on timeout).
void run_p2p(Call& call, const std::vector<P2POp>& ops) {
  for (const P2POp& p : ops) check_tag(call, p.tag);
  std::vector<MPI_Request> requests(ops.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& p = ops[i];
    MPI_Datatype type = datatype(p.dtype);
    CallGuard guard;
    if (p.kind == P2POp::kSend) {
      call.check(
          MPI_Isend(p.buffer, int(p.count), type, p.peer, int(p.tag), call.comm, &requests[i]),
          "MPI_Isend");
    } else {
      call.check(
          MPI_Irecv(p.buffer, int(p.count), type, p.peer, int(p.tag), call.comm, &requests[i]),
          "MPI_Irecv");
    }
  }
  std::vector<MPI_Status> statuses(ops.size());
  call.wait(requests.data(), int(requests.size()), /*cancellable=*/true, &statuses);
  // A shorter message than the receive expected is a mismatch, as on the native backend (a
  // longer one already failed with MPI_ERR_TRUNCATE).
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& p = ops[i];
    if (p.kind != P2POp::kRecv) continue;
    int got = 0;
    MPI_Get_count(&statuses[i], datatype(p.dtype), &got);
    if (size_t(got) == p.count) continue;
    throw CollectiveMismatch(detail::str(call.name, ": rank ", p.peer, " sent ", got,
                                         " elements with tag ", p.tag, ", this rank expected ",
                                         p.count));
  }
}

std::string describe_p2p(const std::vector<P2POp>& ops) {
  if (ops.size() != 1) return detail::str(ops.size(), " operations");
  const P2POp& p = ops[0];
  return detail::str(describe(p.count, p.dtype), p.kind == P2POp::kSend ? ", to " : ", from ",
                     "rank ", p.peer, ", tag ", p.tag);
}

Op p2p_op(const char* kind, MpiCommunicator& c, std::vector<P2POp> ops, milliseconds timeout) {
  for (const P2POp& p : ops) check_p2p(kind, c, p);
  std::string what = describe_p2p(ops);
  return {kind, std::move(what), timeout,
          [ops = std::move(ops)](Call& call) { run_p2p(call, ops); }};
}

Op send_op(MpiCommunicator& c, const SendOptions& o) {
  return p2p_op("send", c, {as_p2p(o)}, o.timeout);
}

Op recv_op(MpiCommunicator& c, const RecvOptions& o) {
  return p2p_op("recv", c, {as_p2p(o)}, o.timeout);
}

}  // namespace

COHORT_MPI_PAIR(reduce_scatter, ReduceScatterOptions)
COHORT_MPI_PAIR(gather, GatherOptions)
COHORT_MPI_PAIR(scatter, ScatterOptions)
COHORT_MPI_PAIR(alltoall, AlltoallOptions)
COHORT_MPI_PAIR(barrier, BarrierOptions)
COHORT_MPI_PAIR(send, SendOptions)
COHORT_MPI_PAIR(recv, RecvOptions)

void batch_send_recv(MpiCommunicator& c, const std::vector<P2POp>& ops, milliseconds timeout) {
  c.run(p2p_op("batch_send_recv", c, ops, timeout));
}

Work batch_send_recv_async(MpiCommunicator& c, const std::vector<P2POp>& ops,
                           milliseconds timeout) {
  return c.submit(p2p_op("batch_send_recv", c, ops, timeout));
}

}  // namespace cohort::comm
