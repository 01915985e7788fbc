#include "cohort/comm/cost_model.h"
#include "cohort/core/clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "cohort/comm/collectives.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm {
namespace {

int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

double fold_us(const CostModel& m, int n, double bytes) {
  if (n == floor_pow2(n)) return 0;
  return 2 * m.alpha_us + 2 * bytes * m.beta_us_per_byte + bytes * m.gamma_us_per_byte;
}

// Half the mean round trip of `iters` ping-pongs of `bytes` between ranks 0 and 1, in us.
double one_way_us(Communicator& c, std::vector<char>& buf, size_t bytes, int iters) {
  int peer = 1 - c.rank();
  SendOptions s{.buffer = buf.data(), .count = bytes, .dtype = DType::u8, .peer = peer};
  RecvOptions r{.buffer = buf.data(), .count = bytes, .dtype = DType::u8, .peer = peer};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (c.rank() == 0) {
      send(c, s);
      recv(c, r);
    } else {
      recv(c, r);
      send(c, s);
    }
  }
  return seconds_since(t0) * 1e6 / (2.0 * iters);
}

}  // namespace

double CostModel::allreduce_us(Algorithm algorithm, int n, size_t bytes) const {
  if (n <= 1) return 0;
  double N = double(bytes), a = alpha_us, b = beta_us_per_byte, g = gamma_us_per_byte;
  int p = floor_pow2(n);
  double lg = std::log2(double(p));
  switch (algorithm) {
    case Algorithm::kRecursiveDoubling:
      return lg * (a + N * b + N * g) + fold_us(*this, n, N);
    case Algorithm::kHalvingDoubling:
      return 2 * lg * a + 2.0 * (p - 1) / p * N * b + double(p - 1) / p * N * g +
             fold_us(*this, n, N);
    default:
      return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * N * b + double(n - 1) / n * N * g;
  }
}

Algorithm CostModel::best_allreduce(int n, size_t bytes) const {
  Algorithm best = Algorithm::kRing;
  double best_us = allreduce_us(best, n, bytes);
  for (Algorithm a : {Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    double us = allreduce_us(a, n, bytes);
    // A clear win only (10%): in close calls the pipelined ring measured better here.
    if (us < best_us * 0.9) {
      best = a;
      best_us = us;
    }
  }
  return best;
}

std::string CostModel::describe() const {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "alpha %.2f us, beta %.2f GB/s, gamma %.2f GB/s", alpha_us,
                1e-3 / beta_us_per_byte, 1e-3 / gamma_us_per_byte);
  return buf;
}

CostModel measure_cost_model(Communicator& c, const MeasureOptions& o) {
  COHORT_CHECK_ARG(o.latency_iters > 0 && o.bandwidth_iters > 0 && o.bandwidth_bytes >= 1024,
                   "measure_cost_model: latency_iters ", o.latency_iters, " and bandwidth_iters ",
                   o.bandwidth_iters, " must be positive and bandwidth_bytes ", o.bandwidth_bytes,
                   " at least 1024");
  if (c.size() == 1) return c.cost_model();
  double figures[3] = {0, 0, 0};
  if (c.rank() <= 1) {
    const size_t big = o.bandwidth_bytes / 4 * 4;  // whole floats for the reduction
    std::vector<char> buf(big, 1);
    one_way_us(c, buf, 8, 20);  // warm up the path
    double alpha = one_way_us(c, buf, 8, o.latency_iters);
    double big_us = one_way_us(c, buf, big, o.bandwidth_iters);
    std::vector<float> x(big / 4, 1.0f), y(big / 4, 2.0f);
    auto t0 = std::chrono::steady_clock::now();
    reduce(DType::f32, ReduceOp::sum, y.data(), x.data(), y.data(), x.size());
    double reduce_us = seconds_since(t0) * 1e6;
    // Floors keep a noisy measurement from producing a nonsensical (zero or negative) cost.
    figures[0] = std::max(alpha, 0.1);
    figures[1] = std::max((big_us - alpha) / double(big), 1.0 / 100e3);
    figures[2] = std::max(reduce_us / double(big), 1.0 / 100e3);
  }
  broadcast(c, {.buffer = figures, .count = 3, .dtype = DType::f64, .root = 0});
  CostModel m{figures[0], figures[1], figures[2]};
  c.set_cost_model(m);
  return m;
}

}  // namespace cohort::comm
