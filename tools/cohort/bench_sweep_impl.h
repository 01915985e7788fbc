#pragma once
// The sweep of `cohort bench collectives`, written once as templates over the communicator type
// so that the native backend (bench_sweep.cc) and the MPI one (bench_sweep_mpi.cc) run the same
// buffers, checks and table. Include only from those two files; a file that instantiates it with
// comm::MpiCommunicator includes mpi_backend.h first (the comm:: calls are qualified, so their
// overloads must be visible here). Inputs are small integers, exact in every dtype, so the
// expected result does not depend on the reduction order and the check is exact.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cohort/bench_sweep.h"

namespace cohort::cli::sweep_detail {

using comm::DType;
using Clock = std::chrono::steady_clock;

inline double input_value(int rank, size_t i) {
  return double(rank + 1) + double(i % 5);
}
inline double sum_value(int ranks, size_t i) {
  return double(ranks) * (ranks + 1) / 2 + double(ranks) * double(i % 5);
}

inline void put(DType t, void* buf, size_t i, double v) {
  char* p = static_cast<char*>(buf) + i * comm::dtype_size(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (t) {
    case DType::f32:
      return store(float(v));
    case DType::f64:
      return store(v);
    case DType::f16:
      return store(comm::float_to_half(float(v)));
    case DType::bf16:
      return store(comm::float_to_bf16(float(v)));
    case DType::i32:
      return store(int32_t(v));
    case DType::i64:
      return store(int64_t(v));
    case DType::u8:
      return store(uint8_t(v));
  }
}

inline double get(DType t, const void* buf, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * comm::dtype_size(t);
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (t) {
    case DType::f32:
      return load(float{});
    case DType::f64:
      return load(double{});
    case DType::f16:
      return comm::half_to_float(load(uint16_t{}));
    case DType::bf16:
      return comm::bf16_to_float(load(uint16_t{}));
    case DType::i32:
      return load(int32_t{});
    case DType::i64:
      return double(load(int64_t{}));
    case DType::u8:
      return load(uint8_t{});
  }
  return 0;
}

// One benchmark buffer: ordinary memory, or from the communicator's shared arena
// (`--buffers shared` on the native backend, when it has one).
class BenchBuffer {
 public:
  template <typename C>
  void assign(C& c, size_t bytes, bool shared) {
    heap_.clear();
    shared_ = {};
    if constexpr (requires { c.alloc_shared(bytes); }) {
      if (shared && bytes > 0) shared_ = c.alloc_shared(bytes);
    }
    if (shared_) {
      data_ = shared_.as<char>();
      std::memset(data_, 0, bytes);
    } else {
      heap_.assign(bytes, 0);
      data_ = heap_.data();
    }
    size_ = bytes;
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::vector<char> heap_;
  comm::SharedBuffer shared_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// The buffers of one size and the operation that uses them, on either backend's communicator.
template <typename C>
struct Case {
  const BenchPlan& plan;
  C& comm;
  size_t count = 0;     // elements of the table's "count" column
  size_t per_rank = 0;  // allgather / reduce_scatter: each rank's block
  BenchBuffer in, out;

  void fill() {
    DType t = plan.dtype;
    size_t ts = comm::dtype_size(t);
    int r = comm.rank();
    if (plan.op == BenchOp::kAllgather || plan.op == BenchOp::kReduceScatter)
      per_rank = count / size_t(plan.ranks);
    size_t n_in = plan.op == BenchOp::kAllgather       ? per_rank
                  : plan.op == BenchOp::kReduceScatter ? per_rank * size_t(plan.ranks)
                                                       : count;
    size_t n_out = plan.op == BenchOp::kAllgather       ? per_rank * size_t(plan.ranks)
                   : plan.op == BenchOp::kReduceScatter ? per_rank
                                                        : count;
    in.assign(comm, n_in * ts, plan.shared_buffers);
    out.assign(comm, n_out * ts, plan.shared_buffers);
    for (size_t i = 0; i < n_in; ++i) put(t, in.data(), i, input_value(r, i));
    // Broadcast works in one buffer: the root's holds the data, the others' something else.
    if (plan.op == BenchOp::kBroadcast)
      for (size_t i = 0; i < n_out; ++i) put(t, out.data(), i, r == 0 ? input_value(0, i) : -1);
  }

  void run_once() {
    C& c = comm;
    DType t = plan.dtype;
    switch (plan.op) {
      case BenchOp::kAllreduce:
        return comm::allreduce(c, {.input = in.data(),
                                   .output = out.data(),
                                   .count = count,
                                   .dtype = t,
                                   .algorithm = plan.algorithm});
      case BenchOp::kBroadcast:
        return comm::broadcast(
            c, {.buffer = out.data(), .count = count, .dtype = t, .algorithm = plan.algorithm});
      case BenchOp::kAllgather:
        return comm::allgather(
            c, {.input = in.data(), .output = out.data(), .count = per_rank, .dtype = t});
      case BenchOp::kReduceScatter:
        return comm::reduce_scatter(
            c, {.input = in.data(), .output = out.data(), .count = per_rank, .dtype = t});
    }
  }

  int64_t count_wrong() const {
    DType t = plan.dtype;
    int n = plan.ranks;
    size_t n_out = out.size() / comm::dtype_size(t);
    int64_t wrong = 0;
    for (size_t i = 0; i < n_out; ++i) {
      double want = 0;
      switch (plan.op) {
        case BenchOp::kAllreduce:
          want = sum_value(n, i);
          break;
        case BenchOp::kBroadcast:
          want = input_value(0, i);
          break;
        case BenchOp::kAllgather:
          want = input_value(int(i / per_rank), i % per_rank);
          break;
        case BenchOp::kReduceScatter:
          want = sum_value(n, size_t(comm.rank()) * per_rank + i);
          break;
      }
      wrong += get(t, out.data(), i) != want;
    }
    return wrong;
  }
};

inline std::string size_label(size_t bytes) {
  return std::to_string(bytes);
}

inline void print_header(const BenchPlan& plan, const char* transport) {
  const char* ops[] = {"allreduce", "broadcast", "allgather", "reduce_scatter"};
  std::printf(
      "# cohort bench collectives: op %s, %d ranks, transport %s, algo %s, iters %d, "
      "warmup %d\n",
      ops[int(plan.op)], plan.ranks, transport, comm::algorithm_name(plan.algorithm), plan.iters,
      plan.warmup);
  std::printf("# time: median over iters of the slowest rank; busbw factor %.3f (nccl-tests)\n",
              bus_factor(plan.op, plan.ranks));
  std::printf("%12s %12s %6s %12s %12s %12s %8s  %s\n", "size(B)", "count", "type", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong", "algo");
  std::fflush(stdout);
}

// Runs the sweep on this rank; rank 0 prints the table. algo_name(bytes) names the algorithm
// of the table's last column. Returns 0, or kWrongResultsExit if any rank saw a wrong element.
template <typename C, typename AlgoName>
int run_sweep(const BenchPlan& plan, C& c, const char* transport, AlgoName algo_name) {
  int rank = c.rank();
  if (rank == 0) print_header(plan, transport);
  size_t ts = comm::dtype_size(plan.dtype);
  int64_t total_wrong = 0;
  for (size_t bytes = plan.min_bytes; bytes <= plan.max_bytes; bytes *= 2) {
    Case<C> k{plan, c, bytes / ts, 0, {}, {}};
    k.fill();
    for (int i = 0; i < plan.warmup; ++i) k.run_once();
    std::vector<double> times(size_t(plan.iters));
    for (double& t : times) {
      auto start = Clock::now();
      k.run_once();
      t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    }
    int64_t wrong = k.count_wrong();
    comm::allreduce(c, {.output = times.data(),
                        .count = times.size(),
                        .dtype = DType::f64,
                        .op = comm::ReduceOp::max});
    comm::allreduce(c, {.output = &wrong, .count = 1, .dtype = DType::i64});
    total_wrong += wrong;
    if (rank == 0) {
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      double us = times[times.size() / 2];
      // allgather / reduce_scatter: the whole gathered (scattered) buffer, as nccl-tests.
      if (plan.op == BenchOp::kAllgather || plan.op == BenchOp::kReduceScatter)
        k.count = k.per_rank * size_t(plan.ranks);
      size_t moved = k.count * ts;
      double algbw = us > 0 ? double(moved) / us / 1e3 : 0;
      const char* algo = algo_name(moved);
      std::printf("%12s %12zu %6s %12.2f %12.3f %12.3f %8lld  %s\n", size_label(moved).c_str(),
                  k.count, comm::dtype_short_name(plan.dtype), us, algbw,
                  algbw * bus_factor(plan.op, plan.ranks), (long long)wrong, algo);
      std::fflush(stdout);
    }
    if (bytes > plan.max_bytes / 2) break;  // no overflow past max
  }
  return total_wrong == 0 ? 0 : kWrongResultsExit;
}

}  // namespace cohort::cli::sweep_detail
