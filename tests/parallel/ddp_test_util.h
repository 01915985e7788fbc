#pragma once
// Helpers for DDP tests: ranks as threads, each with its own Communicator and ProcessGroup over
// one HashStore (DESIGN convention 8), plus deterministic data and parameter snapshots.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/core/thread_pool.h"
#include "cohort/nn/module.h"
#include "tests/comm/collective_util.h"

namespace cohort::parallel::testing {

using PG = std::shared_ptr<comm::ProcessGroup>;

inline comm::CommOptions ddp_comm_options() {
  comm::CommOptions o = comm::testing::test_options(comm::transport::TransportKind::kShm);
  o.chunk_bytes = size_t{16} << 10;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Runs fn(rank, group) on n ranks-as-threads. The intra-op pool is process-global, so it is
// set to one thread: n ranks share the machine's cores.
inline void run_world(int n, const std::function<void(int, PG)>& fn,
                      comm::CommOptions options = ddp_comm_options()) {
  set_num_threads(1);
  auto store = std::make_shared<rendezvous::HashStore>();
  comm::testing::run_ranks(n, [&](int r) {
    auto c = comm::Communicator::create(store, r, n, options);
    fn(r, comm::make_process_group(c));
  });
}

// Every parameter's values, concatenated in registration order.
inline std::vector<float> flat_params(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, t] : m.named_parameters()) {
    auto v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Per parameter: max |a - b| / max |b| must be <= tol. Returns "" or the first failure.
inline std::string compare_params(const nn::Module& got, const nn::Module& want, double tol) {
  auto g = got.named_parameters();
  auto w = want.named_parameters();
  if (g.size() != w.size()) return "parameter counts differ";
  for (size_t i = 0; i < g.size(); ++i) {
    auto a = g[i].second.to_vector<float>();
    auto b = w[i].second.to_vector<float>();
    double diff = 0, scale = 1e-30;
    for (size_t k = 0; k < a.size(); ++k) {
      diff = std::max(diff, double(std::abs(a[k] - b[k])));
      scale = std::max(scale, double(std::abs(b[k])));
    }
    if (diff / scale > tol) {
      return detail::str(g[i].first, ": relative error ", diff / scale, " > ", tol);
    }
  }
  return "";
}

// max |a - b| / max |b| over two flattened parameter lists of one size.
inline double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return diff / scale;
}

// A deterministic classification batch: x [rows, features] ~ N(0,1), y in [0, classes).
inline std::pair<Tensor, Tensor> make_batch(int64_t rows, int64_t features, int64_t classes,
                                            uint64_t seed) {
  Tensor x = randn({rows, features}, seed);
  std::vector<int64_t> y(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    y[size_t(i)] = int64_t((seed * 31 + uint64_t(i) * 7) % uint64_t(classes));
  return {x, from_vector_i64(y, {rows})};
}

// Rows [lo, hi) of a batch as fresh contiguous tensors.
inline std::pair<Tensor, Tensor> rows_of(const std::pair<Tensor, Tensor>& b, int64_t lo,
                                         int64_t hi) {
  return {b.first.slice(0, lo, hi).contiguous_raw(), b.second.slice(0, lo, hi).contiguous_raw()};
}

}  // namespace cohort::parallel::testing
