#pragma once
// The per-rank half of `cohort bench collectives`: the sweep over sizes that every rank runs,
// the correctness check, and the table rank 0 prints (columns and bus-bandwidth factors as in
// nccl-tests, doc/PERFORMANCE.md).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "cohort/comm/collectives.h"
#include "cohort/comm/transport/transport.h"
#include "cohort/net/secret.h"
#include "cohort/rendezvous/store.h"

namespace cohort::cli {

enum class BenchOp { kAllreduce, kBroadcast, kAllgather, kReduceScatter };

// A rank's exit status when the sweep ran but some results were wrong.
inline constexpr int kWrongResultsExit = 3;

struct BenchPlan {
  int ranks = 2;
  // Shared-memory messages from this size are read straight from the sender (0: never).
  size_t single_copy_bytes = comm::transport::DeviceOptions{}.shm_single_copy_bytes;
  bool bind_to_core = true;
  // Buffers from the communicator's shared arena (native backend, all ranks on this host).
  bool shared_buffers = true;
  BenchOp op = BenchOp::kAllreduce;
  comm::DType dtype = comm::DType::f32;
  comm::transport::TransportKind transport = comm::transport::TransportKind::kShm;
  comm::Algorithm algorithm = comm::Algorithm::kAuto;
  size_t min_bytes = 4096;
  size_t max_bytes = 4096;
  int iters = 20;
  int warmup = 5;
  std::chrono::milliseconds timeout{60000};
};

// Each throws InvalidArgument listing the accepted names.
BenchOp parse_bench_op(std::string_view name);
comm::DType parse_bench_dtype(std::string_view name);
comm::transport::TransportKind parse_bench_transport(std::string_view name);
comm::Algorithm parse_bench_algorithm(std::string_view name, BenchOp op);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor (allreduce 2(n-1)/n, broadcast 1,
// allgather and reduce_scatter (n-1)/n, where the size is the whole gathered/scattered buffer).
double bus_factor(BenchOp op, int ranks);

// Runs the sweep on this rank (collective: every rank calls it). Rank 0 prints the table to
// stdout. Returns 0, or kWrongResultsExit if any rank saw a wrong element.
int run_bench_rank(const BenchPlan& plan, std::shared_ptr<rendezvous::Store> store, int rank,
                   const net::Secret& secret);

// The same sweep over the MPI backend (MpiCommunicator, blocking collectives), on this process
// as one rank of an mpirun job; plan.ranks is taken from the job. Defined in bench_sweep_mpi.cc,
// which is built only with cohort_comm_mpi (COHORT_HAVE_MPI_BACKEND); callers check
// kHaveMpiBackend first.
int run_bench_mpi_rank(BenchPlan plan);

#ifdef COHORT_HAVE_MPI_BACKEND
inline constexpr bool kHaveMpiBackend = true;
#else
inline constexpr bool kHaveMpiBackend = false;
#endif

}  // namespace cohort::cli
