// Data-movement collectives: allgather(v), reduce_scatter, gather, scatter, alltoall.
#include <cstring>
#include <numeric>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/collectives.h"
#include "cohort/comm/collectives_internal.h"

namespace cohort::comm {

using namespace internal;

namespace {

// Moves this rank's block into place unless it is there already (in place).
void place_own(const void* input, char* dst, size_t bytes) {
  if (input && input != dst) std::memmove(dst, input, bytes);
}

Communicator::Op allgather_op(Communicator& c, const AllgatherOptions& o) {
  check_common("allgather", c, o.dtype, o.count, o.output, "output");
  auto op =
      make_op(OpCode::kAllgather, o.dtype, ReduceOp::sum, Algorithm::kRing, -1, o.count, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  op.body = [o, chunk](Exec& ex) {
    if (o.count == 0) return;
    size_t bytes = o.count * ex.elem();
    char* out = static_cast<char*>(o.output);
    place_own(o.input, out + size_t(ex.rank()) * bytes, bytes);
    auto segs = algo::Segments::of(std::vector<size_t>(size_t(ex.size()), o.count));
    algo::allgather_ring(ex, out, segs, chunk);
  };
  return op;
}

Communicator::Op allgatherv_op(Communicator& c, const AllgathervOptions& o) {
  COHORT_CHECK_ARG(o.counts.size() == size_t(c.size()), "allgatherv on rank ", c.rank(), ": ",
                   o.counts.size(), " counts for ", c.size(), " ranks");
  size_t total = std::accumulate(o.counts.begin(), o.counts.end(), size_t{0});
  check_common("allgatherv", c, o.dtype, total, o.output, "output");
  auto op =
      make_op(OpCode::kAllgatherv, o.dtype, ReduceOp::sum, Algorithm::kRing, -1, total, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  op.body = [o, total, chunk](Exec& ex) {
    if (total == 0) return;
    auto segs = algo::Segments::of(o.counts);
    size_t r = size_t(ex.rank()), elem = ex.elem();
    char* out = static_cast<char*>(o.output);
    place_own(o.input, out + segs.offset[r] * elem, segs.length[r] * elem);
    algo::allgather_ring(ex, out, segs, chunk);
  };
  return op;
}

Communicator::Op reduce_scatter_op(Communicator& c, const ReduceScatterOptions& o) {
  check_common("reduce_scatter", c, o.dtype, o.count, o.output, "output");
  check_common("reduce_scatter", c, o.dtype, o.count, o.input, "input");
  check_reduce_op(o.op, "reduce_scatter");
  auto op =
      make_op(OpCode::kReduceScatter, o.dtype, o.op, Algorithm::kRing, -1, o.count, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  op.body = [o, chunk](Exec& ex) {
    if (o.count == 0) return;
    algo::reduce_scatter_ring(ex, static_cast<const char*>(o.input), static_cast<char*>(o.output),
                              o.count, chunk);
  };
  return op;
}

Communicator::Op gather_op(Communicator& c, const GatherOptions& o) {
  check_root("gather", c, o.root);
  check_common("gather", c, o.dtype, o.count, o.input, "input");
  if (c.rank() == o.root) check_common("gather", c, o.dtype, o.count, o.output, "output");
  auto op = make_op(OpCode::kGather, o.dtype, ReduceOp::sum, Algorithm::kDirect, o.root, o.count,
                    o.timeout);
  op.body = [o](Exec& ex) {
    if (o.count == 0) return;
    algo::gather_direct(ex, static_cast<const char*>(o.input), static_cast<char*>(o.output),
                        o.count, o.root);
  };
  return op;
}

Communicator::Op scatter_op(Communicator& c, const ScatterOptions& o) {
  check_root("scatter", c, o.root);
  check_common("scatter", c, o.dtype, o.count, o.output, "output");
  if (c.rank() == o.root) check_common("scatter", c, o.dtype, o.count, o.input, "input");
  auto op = make_op(OpCode::kScatter, o.dtype, ReduceOp::sum, Algorithm::kDirect, o.root, o.count,
                    o.timeout);
  op.body = [o](Exec& ex) {
    if (o.count == 0) return;
    algo::scatter_direct(ex, static_cast<const char*>(o.input), static_cast<char*>(o.output),
                         o.count, o.root);
  };
  return op;
}

Communicator::Op alltoall_op(Communicator& c, const AlltoallOptions& o) {
  check_common("alltoall", c, o.dtype, o.count, o.input, "input");
  check_common("alltoall", c, o.dtype, o.count, o.output, "output");
  COHORT_CHECK_ARG(o.count == 0 || o.input != o.output, "alltoall on rank ", c.rank(),
                   ": input and output must be distinct buffers");
  auto op = make_op(OpCode::kAlltoall, o.dtype, ReduceOp::sum, Algorithm::kDirect, -1, o.count,
                    o.timeout);
  op.body = [o](Exec& ex) {
    if (o.count == 0) return;
    algo::alltoall_direct(ex, static_cast<const char*>(o.input), static_cast<char*>(o.output),
                          o.count);
  };
  return op;
}

}  // namespace

void allgather(Communicator& c, const AllgatherOptions& o) {
  c.run(allgather_op(c, o));
}
void allgatherv(Communicator& c, const AllgathervOptions& o) {
  c.run(allgatherv_op(c, o));
}
void reduce_scatter(Communicator& c, const ReduceScatterOptions& o) {
  c.run(reduce_scatter_op(c, o));
}
void gather(Communicator& c, const GatherOptions& o) {
  c.run(gather_op(c, o));
}
void scatter(Communicator& c, const ScatterOptions& o) {
  c.run(scatter_op(c, o));
}
void alltoall(Communicator& c, const AlltoallOptions& o) {
  c.run(alltoall_op(c, o));
}

Work allgather_async(Communicator& c, const AllgatherOptions& o) {
  return c.submit(allgather_op(c, o));
}
Work allgatherv_async(Communicator& c, const AllgathervOptions& o) {
  return c.submit(allgatherv_op(c, o));
}
Work reduce_scatter_async(Communicator& c, const ReduceScatterOptions& o) {
  return c.submit(reduce_scatter_op(c, o));
}
Work gather_async(Communicator& c, const GatherOptions& o) {
  return c.submit(gather_op(c, o));
}
Work scatter_async(Communicator& c, const ScatterOptions& o) {
  return c.submit(scatter_op(c, o));
}
Work alltoall_async(Communicator& c, const AlltoallOptions& o) {
  return c.submit(alltoall_op(c, o));
}

}  // namespace cohort::comm
