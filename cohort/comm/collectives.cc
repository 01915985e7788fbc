// Reducing and rooted collectives: argument checks, algorithm choice, dispatch.
#include "cohort/comm/collectives.h"

#include <cstdint>
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/collectives_internal.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm {

namespace internal {

void check_common(const char* op, const Communicator& c, DType dtype, size_t count,
                  const void* buffer, const char* buffer_name) {
  check_dtype(dtype, op);
  COHORT_CHECK_ARG(count == 0 || buffer != nullptr, op, " on rank ", c.rank(), ": ", buffer_name,
                   " is null with count ", count);
}

void check_root(const char* op, const Communicator& c, int root) {
  COHORT_CHECK_ARG(root >= 0 && root < c.size(), op, " on rank ", c.rank(), ": root ", root,
                   " is not in [0, ", c.size(), ")");
}

void check_algorithm(const char* op, Algorithm chosen, std::initializer_list<Algorithm> valid) {
  for (Algorithm a : valid) {
    if (a == chosen) return;
  }
  std::string names;
  for (Algorithm a : valid) names += detail::str(names.empty() ? "" : ", ", algorithm_name(a));
  throw InvalidArgument(detail::str(op, ": algorithm ", algorithm_name(chosen),
                                    " is not available (choose auto, ", names, ")"));
}

Communicator::Op make_op(OpCode code, DType dtype, ReduceOp rop, Algorithm algo, int root,
                         uint64_t count, milliseconds timeout) {
  Communicator::Op op;
  op.sig.op = code;
  op.sig.dtype = dtype;
  op.sig.reduce_op = rop;
  op.sig.algorithm = algo;
  op.sig.root = root;
  op.sig.count = count;
  op.timeout = timeout;
  return op;
}

}  // namespace internal

using namespace internal;

Algorithm choose_allreduce_algorithm(const Communicator& c, size_t bytes) {
  // Across hosts the flat algorithms push every byte over the slow links several times; the
  // hierarchy crosses them once per host. Measured over veth between network namespaces (2 x 2
  // ranks) it won at every size from 4 KiB to 16 MiB. The topology is the same on every rank.
  if (c.topology().is_hierarchical()) {
    return Algorithm::kHierarchical;
  }
  return c.cost_model().best_allreduce(c.size(), bytes);
}

namespace {

// Buffers in the shared arena (shared_buffer.h) are reduced in place when large enough that
// the three small exchanges of that algorithm are cheaper than the rings' pipelining.
bool use_shared_buffers(const Communicator& c, const AllreduceOptions& o, size_t bytes) {
  const void* in = o.input ? o.input : o.output;
  return bytes >= c.options().shared_buffers_min_bytes && c.size() > 1 &&
         c.in_shared_arena(in, bytes) && c.in_shared_arena(o.output, bytes);
}

Communicator::Op allreduce_op(Communicator& c, const AllreduceOptions& o) {
  check_common("allreduce", c, o.dtype, o.count, o.output, "output");
  check_reduce_op(o.op, "allreduce");
  COHORT_CHECK_ARG(o.count <= SIZE_MAX / dtype_size(o.dtype), "allreduce on rank ", c.rank(),
                   ": count ", o.count, " overflows a byte size");
  size_t bytes = o.count * dtype_size(o.dtype);
  Algorithm algo = o.algorithm;
  if (algo == Algorithm::kAuto) {
    algo = use_shared_buffers(c, o, bytes) ? Algorithm::kSharedBuffers
                                           : choose_allreduce_algorithm(c, bytes);
  }
  check_algorithm("allreduce", algo,
                  {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling,
                   Algorithm::kHierarchical, Algorithm::kSharedBuffers});
  const void* in = o.input ? o.input : o.output;
  COHORT_CHECK_ARG(algo != Algorithm::kSharedBuffers ||
                       (c.in_shared_arena(in, bytes) && c.in_shared_arena(o.output, bytes)),
                   "allreduce on rank ", c.rank(),
                   ": algorithm shared_buffers needs input and output in this rank's shared "
                   "arena (Communicator::alloc_shared)");
  auto op = make_op(OpCode::kAllreduce, o.dtype, o.op, algo, -1, o.count, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  const HostTopology* topo = &c.topology();  // the communicator outlives its operations
  op.body = [o, algo, bytes, chunk, topo](Exec& ex) {
    char* out = static_cast<char*>(o.output);
    if (algo == Algorithm::kSharedBuffers && ex.size() > 1) {  // reads the input in place
      const char* in = static_cast<const char*>(o.input ? o.input : o.output);
      return algo::allreduce_shared_buffers(ex, in, out, o.count);
    }
    if (o.input && o.input != o.output) std::memcpy(out, o.input, bytes);
    if (o.count == 0 || ex.size() == 1) return;
    switch (algo) {
      case Algorithm::kRecursiveDoubling:
        return algo::allreduce_recursive_doubling(ex, out, o.count);
      case Algorithm::kHalvingDoubling:
        return algo::allreduce_halving_doubling(ex, out, o.count);
      case Algorithm::kHierarchical:
        return algo::allreduce_hierarchical(ex, out, o.count, *topo, chunk);
      default:
        return algo::allreduce_ring(ex, out, o.count, chunk);
    }
  };
  return op;
}

Communicator::Op broadcast_op(Communicator& c, const BroadcastOptions& o) {
  check_common("broadcast", c, o.dtype, o.count, o.buffer, "buffer");
  check_root("broadcast", c, o.root);
  size_t bytes = o.count * dtype_size(o.dtype);
  Algorithm algo = o.algorithm;
  if (algo == Algorithm::kAuto) {
    algo = bytes <= c.options().small_message_bytes ? Algorithm::kTree : Algorithm::kRing;
  }
  check_algorithm("broadcast", algo, {Algorithm::kTree, Algorithm::kRing});
  auto op = make_op(OpCode::kBroadcast, o.dtype, ReduceOp::sum, algo, o.root, o.count, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  op.body = [o, algo, bytes, chunk](Exec& ex) {
    if (bytes == 0 || ex.size() == 1) return;
    char* buf = static_cast<char*>(o.buffer);
    if (algo == Algorithm::kTree) return algo::broadcast_tree(ex, buf, bytes, o.root);
    algo::broadcast_chain(ex, buf, bytes, o.root, chunk);
  };
  return op;
}

Communicator::Op reduce_op(Communicator& c, const ReduceOptions& o) {
  check_root("reduce", c, o.root);
  bool root = c.rank() == o.root;
  check_common("reduce", c, o.dtype, o.count, root ? o.output : o.input, root ? "output" : "input");
  check_reduce_op(o.op, "reduce");
  size_t bytes = o.count * dtype_size(o.dtype);
  Algorithm algo = o.algorithm;
  if (algo == Algorithm::kAuto) {
    algo = bytes <= c.options().small_message_bytes ? Algorithm::kTree : Algorithm::kRing;
  }
  check_algorithm("reduce", algo, {Algorithm::kTree, Algorithm::kRing});
  auto op = make_op(OpCode::kReduce, o.dtype, o.op, algo, o.root, o.count, o.timeout);
  size_t chunk = c.options().chunk_bytes;
  op.body = [o, algo, chunk](Exec& ex) {
    if (o.count == 0) return;
    const char* in = static_cast<const char*>(o.input ? o.input : o.output);
    char* out = static_cast<char*>(o.output);
    if (ex.size() == 1) {
      if (in != out) std::memcpy(out, in, o.count * ex.elem());
      return;
    }
    if (algo == Algorithm::kTree) return algo::reduce_tree(ex, in, out, o.count, o.root);
    algo::reduce_ring(ex, in, out, o.count, o.root, chunk);
  };
  return op;
}

Communicator::Op barrier_op(const BarrierOptions& o) {
  auto op = make_op(OpCode::kBarrier, DType::u8, ReduceOp::sum, Algorithm::kDissemination, -1, 0,
                    o.timeout);
  op.body = [](Exec& ex) { algo::barrier_dissemination(ex); };
  return op;
}

}  // namespace

void allreduce(Communicator& c, const AllreduceOptions& o) {
  c.run(allreduce_op(c, o));
}
void broadcast(Communicator& c, const BroadcastOptions& o) {
  c.run(broadcast_op(c, o));
}
void reduce(Communicator& c, const ReduceOptions& o) {
  c.run(reduce_op(c, o));
}
void barrier(Communicator& c, const BarrierOptions& o) {
  c.run(barrier_op(o));
}

Work allreduce_async(Communicator& c, const AllreduceOptions& o) {
  return c.submit(allreduce_op(c, o));
}
Work broadcast_async(Communicator& c, const BroadcastOptions& o) {
  return c.submit(broadcast_op(c, o));
}
Work reduce_async(Communicator& c, const ReduceOptions& o) {
  return c.submit(reduce_op(c, o));
}
Work barrier_async(Communicator& c, const BarrierOptions& o) {
  return c.submit(barrier_op(o));
}

}  // namespace cohort::comm
