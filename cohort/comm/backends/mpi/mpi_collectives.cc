// The collectives of collectives.h over MPI: argument checks as in the native backend, then
// one non-blocking MPI call polled to its deadline (MpiCommunicator::Call::wait).
#include <climits>

#include "cohort/comm/backends/mpi/mpi_internal.h"
#include "cohort/comm/reduce.h"
#include "cohort/core/error.h"

namespace cohort::comm {

namespace mpi_detail {

int int_count(const char* op, const MpiCommunicator& c, size_t count) {
  COHORT_CHECK_ARG(count <= size_t(INT_MAX), op, " on rank ", c.rank(), ": count ", count,
                   " does not fit in an MPI count (int); split the buffer");
  return int(count);
}

void check_buffer(const char* op, const MpiCommunicator& c, DType dtype, size_t count,
                  const void* buffer, const char* buffer_name) {
  check_dtype(dtype, op);
  int_count(op, c, count);
  COHORT_CHECK_ARG(count == 0 || buffer != nullptr, op, " on rank ", c.rank(), ": ", buffer_name,
                   " is null with count ", count);
}

void check_root(const char* op, const MpiCommunicator& c, int root) {
  COHORT_CHECK_ARG(root >= 0 && root < c.size(), op, " on rank ", c.rank(), ": root ", root,
                   " is not in [0, ", c.size(), ")");
}

void check_auto(const char* op, Algorithm a) {
  COHORT_CHECK_ARG(a == Algorithm::kAuto, op, ": algorithm ", algorithm_name(a),
                   " is not available on the MPI backend (Open MPI chooses its own; force one "
                   "with --mca coll_tuned_* parameters)");
}

std::string describe(size_t count, DType dtype) {
  return detail::str("count=", count, ", ", dtype_short_name(dtype));
}

Reduction reduction(const char* name, DType dtype, ReduceOp op) {
  check_reduce_op(op, name);
  return {datatype(dtype), reduce_op(dtype, op)};
}

}  // namespace mpi_detail

namespace {

using Call = MpiCommunicator::Call;
using Op = MpiCommunicator::Op;
using namespace mpi_detail;

Op allreduce_op(MpiCommunicator& c, const AllreduceOptions& o) {
  check_buffer("allreduce", c, o.dtype, o.count, o.output, "output");
  check_auto("allreduce", o.algorithm);
  Reduction r = reduction("allreduce", o.dtype, o.op);
  return {"allreduce", describe(o.count, o.dtype) + ", " + reduce_op_name(o.op), o.timeout,
          [o, r](Call& call) {
            if (o.count == 0) return;
            const void* in = (o.input == nullptr || o.input == o.output) ? MPI_IN_PLACE : o.input;
            collective(
                call, "MPI_Allreduce",
                [&] { return MPI_Allreduce(in, o.output, int(o.count), r.type, r.op, call.comm); },
                [&](MPI_Request* q) {
                  return MPI_Iallreduce(in, o.output, int(o.count), r.type, r.op, call.comm, q);
                });
            if (o.op == ReduceOp::avg) divide_by(o.dtype, o.output, o.count, call.size);
          }};
}

Op broadcast_op(MpiCommunicator& c, const BroadcastOptions& o) {
  check_buffer("broadcast", c, o.dtype, o.count, o.buffer, "buffer");
  check_root("broadcast", c, o.root);
  check_auto("broadcast", o.algorithm);
  MPI_Datatype type = datatype(o.dtype);
  return {"broadcast", describe(o.count, o.dtype) + detail::str(", root=", o.root), o.timeout,
          [o, type](Call& call) {
            if (o.count == 0) return;
            collective(
                call, "MPI_Bcast",
                [&] { return MPI_Bcast(o.buffer, int(o.count), type, o.root, call.comm); },
                [&](MPI_Request* q) {
                  return MPI_Ibcast(o.buffer, int(o.count), type, o.root, call.comm, q);
                });
          }};
}

Op reduce_op(MpiCommunicator& c, const ReduceOptions& o) {
  check_root("reduce", c, o.root);
  bool root = c.rank() == o.root;
  const void* source = o.input ? o.input : o.output;
  check_buffer("reduce", c, o.dtype, o.count, source, o.input ? "input" : "input (and output)");
  if (root) check_buffer("reduce", c, o.dtype, o.count, o.output, "output on the root");
  check_auto("reduce", o.algorithm);
  Reduction r = reduction("reduce", o.dtype, o.op);
  return {"reduce",
          describe(o.count, o.dtype) + ", " + reduce_op_name(o.op) + detail::str(", root=", o.root),
          o.timeout, [o, r, root, source](Call& call) {
            if (o.count == 0) return;
            const void* in = root && source == o.output ? MPI_IN_PLACE : source;
            void* out = root ? o.output : nullptr;
            collective(
                call, "MPI_Reduce",
                [&] { return MPI_Reduce(in, out, int(o.count), r.type, r.op, o.root, call.comm); },
                [&](MPI_Request* q) {
                  return MPI_Ireduce(in, out, int(o.count), r.type, r.op, o.root, call.comm, q);
                });
            if (root && o.op == ReduceOp::avg) divide_by(o.dtype, o.output, o.count, call.size);
          }};
}

Op allgather_op(MpiCommunicator& c, const AllgatherOptions& o) {
  check_buffer("allgather", c, o.dtype, o.count * size_t(c.size()), o.output, "output");
  int_count("allgather", c, o.count * size_t(c.size()));
  MPI_Datatype type = datatype(o.dtype);
  size_t bytes = o.count * dtype_size(o.dtype);
  return {"allgather", describe(o.count, o.dtype), o.timeout, [o, type, bytes](Call& call) {
            if (o.count == 0) return;
            const void* own = static_cast<const char*>(o.output) + size_t(call.rank) * bytes;
            const void* in = (o.input == nullptr || o.input == own) ? MPI_IN_PLACE : o.input;
            collective(
                call, "MPI_Allgather",
                [&] {
                  return MPI_Allgather(in, int(o.count), type, o.output, int(o.count), type,
                                       call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Iallgather(in, int(o.count), type, o.output, int(o.count), type,
                                        call.comm, q);
                });
          }};
}

Op allgatherv_op(MpiCommunicator& c, const AllgathervOptions& o) {
  COHORT_CHECK_ARG(o.counts.size() == size_t(c.size()), "allgatherv on rank ", c.rank(), ": ",
                   o.counts.size(), " counts for ", c.size(), " ranks");
  std::vector<int> counts, displs;
  size_t total = 0;
  for (size_t k : o.counts) {
    counts.push_back(int_count("allgatherv", c, k));
    displs.push_back(int_count("allgatherv", c, total));
    total += k;
  }
  check_buffer("allgatherv", c, o.dtype, total, o.output, "output");
  MPI_Datatype type = datatype(o.dtype);
  return {"allgatherv", describe(total, o.dtype), o.timeout,
          [o, type, counts, displs, total](Call& call) {
            if (total == 0) return;
            const void* own = static_cast<const char*>(o.output) +
                              size_t(displs[size_t(call.rank)]) * dtype_size(o.dtype);
            const void* in = (o.input == nullptr || o.input == own) ? MPI_IN_PLACE : o.input;
            collective(
                call, "MPI_Allgatherv",
                [&] {
                  return MPI_Allgatherv(in, counts[size_t(call.rank)], type, o.output,
                                        counts.data(), displs.data(), type, call.comm);
                },
                [&](MPI_Request* q) {
                  return MPI_Iallgatherv(in, counts[size_t(call.rank)], type, o.output,
                                         counts.data(), displs.data(), type, call.comm, q);
                });
          }};
}

}  // namespace

COHORT_MPI_PAIR(allreduce, AllreduceOptions)
COHORT_MPI_PAIR(broadcast, BroadcastOptions)
COHORT_MPI_PAIR(reduce, ReduceOptions)
COHORT_MPI_PAIR(allgather, AllgatherOptions)
COHORT_MPI_PAIR(allgatherv, AllgathervOptions)

}  // namespace cohort::comm
