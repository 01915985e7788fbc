// The sweep every rank of `cohort bench collectives` runs (see bench_sweep.h): the argument
// parsers and the native backend's rank; the sweep itself is in bench_sweep_impl.h, shared with
// bench_sweep_mpi.cc.
#include "tools/cohort/bench_sweep.h"

#include <string>
#include <vector>

#include "cohort/core/error.h"
#include "tools/cohort/bench_sweep_impl.h"

namespace cohort::cli {

using comm::DType;

BenchOp parse_bench_op(std::string_view name) {
  if (name == "allreduce") return BenchOp::kAllreduce;
  if (name == "broadcast") return BenchOp::kBroadcast;
  if (name == "allgather") return BenchOp::kAllgather;
  if (name == "reduce_scatter") return BenchOp::kReduceScatter;
  COHORT_CHECK_ARG(false, "bench collectives: unknown --op '", name,
                   "' (allreduce, broadcast, allgather, reduce_scatter)");
  return BenchOp::kAllreduce;
}

DType parse_bench_dtype(std::string_view name) {
  for (int t = 0; t < comm::kNumDTypes; ++t) {
    if (name == comm::dtype_short_name(DType(t))) return DType(t);
  }
  COHORT_CHECK_ARG(false, "bench collectives: unknown --dtype '", name,
                   "' (f32, f64, f16, bf16, i32, i64, u8)");
  return DType::f32;
}

comm::transport::TransportKind parse_bench_transport(std::string_view name) {
  using comm::transport::TransportKind;
  if (name == "shm") return TransportKind::kShm;
  if (name == "tcp") return TransportKind::kTcp;
  if (name == "auto") return TransportKind::kAuto;
  COHORT_CHECK_ARG(false, "bench collectives: unknown --transport '", name, "' (shm, tcp, auto)");
  return TransportKind::kAuto;
}

comm::Algorithm parse_bench_algorithm(std::string_view name, BenchOp op) {
  using comm::Algorithm;
  std::vector<Algorithm> valid;
  switch (op) {
    case BenchOp::kAllreduce:
      valid = {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling,
               Algorithm::kHalvingDoubling, Algorithm::kHierarchical};
      break;
    case BenchOp::kBroadcast:
      valid = {Algorithm::kAuto, Algorithm::kTree, Algorithm::kRing};
      break;
    default:  // allgather and reduce_scatter have one algorithm (ring)
      valid = {Algorithm::kAuto, Algorithm::kRing};
  }
  std::string names;
  for (Algorithm a : valid) {
    if (name == comm::algorithm_name(a)) return a;
    names += std::string(names.empty() ? "" : ", ") + comm::algorithm_name(a);
  }
  COHORT_CHECK_ARG(false, "bench collectives: --algo '", name, "' is not valid for this --op (",
                   names, ")");
  return Algorithm::kAuto;
}

double bus_factor(BenchOp op, int ranks) {
  double n = ranks;
  switch (op) {
    case BenchOp::kAllreduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kBroadcast:
      return 1.0;
    default:
      return (n - 1) / n;
  }
}

int run_bench_rank(const BenchPlan& plan, std::shared_ptr<rendezvous::Store> store, int rank,
                   const net::Secret& secret) {
  comm::CommOptions co;
  co.device.transport = plan.transport;
  co.device.shm_single_copy_bytes = plan.single_copy_bytes;
  co.device.secret = secret;
  co.timeout = plan.timeout;
  co.connect_timeout = plan.timeout;
  auto c = comm::Communicator::create(std::move(store), rank, plan.ranks, co);
  const char* transport = plan.ranks > 1 ? c->transport_of(1 % plan.ranks) : "self";
  bool shared = plan.shared_buffers && c->has_shared_arena();
  auto algo_name = [&](size_t bytes) {
    if (plan.op != BenchOp::kAllreduce || plan.algorithm != comm::Algorithm::kAuto)
      return comm::algorithm_name(plan.algorithm);
    if (shared && bytes >= c->options().shared_buffers_min_bytes)
      return comm::algorithm_name(comm::Algorithm::kSharedBuffers);
    return comm::algorithm_name(comm::choose_allreduce_algorithm(*c, bytes));
  };
  return sweep_detail::run_sweep(plan, *c, transport, algo_name);
}

}  // namespace cohort::cli
