#include "cohort/federated/rdp_accountant.h"

#include <cmath>
#include <limits>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(e^a + e^b), exact at -infinity.
double log_add(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

// log(e^a - e^b) for a >= b. The fractional series alternates in sign past i > alpha; its
// partial sums stay positive (they converge to A_alpha > 0 from the first, dominant term).
double log_sub(double a, double b) {
  if (b == -kInf) return a;
  COHORT_INTERNAL(a >= b, "rdp: log-space subtraction would go negative (", a, " < ", b, ")");
  if (a == b) return -kInf;
  return b + std::log(std::expm1(a - b));
}

// log(erfc(x)); past x = 25 erfc underflows toward denormals, so use its asymptotic series
// erfc(x) ~ e^(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)), whose next term
// is below 1e-10 relative there.
double log_erfc(double x) {
  if (x < 25) return std::log(std::erfc(x));
  const double r = 1.0 / (x * x);
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) +
         std::log1p(r * (-0.5 + r * (0.75 - r * 1.875)));
}

// log A_alpha for an integer alpha >= 2: the binomial sum, term i being
// C(alpha, i) (1-q)^(alpha-i) q^i exp((i^2 - i) / (2 z^2)).
double log_a_int(double q, double z, int64_t alpha) {
  double log_a = -kInf, log_coef = 0;  // log C(alpha, 0)
  const double lq = std::log(q), l1q = std::log1p(-q);
  for (int64_t i = 0; i <= alpha; ++i) {
    const double di = double(i);
    const double term = log_coef + di * lq + double(alpha - i) * l1q + (di * di - di) / (2 * z * z);
    log_a = log_add(log_a, term);
    log_coef += std::log(double(alpha - i)) - std::log(di + 1);  // C(alpha, i+1)
  }
  return log_a;
}

// log A_alpha for a fractional alpha > 1 (Mironov, Talwar, Zhang 2019, Section 3.3): the real
// line is split at z0, where the two Gaussians' densities cross for the mixture weights, and
// each side expanded in a series whose i-th terms are s0(i) and s1(i) below.
double log_a_frac(double q, double z, double alpha) {
  double log_a0 = -kInf, log_a1 = -kInf;
  const double lq = std::log(q), l1q = std::log1p(-q);
  const double z0 = z * z * std::log(1 / q - 1) + 0.5;
  double log_coef = 0, sign = 1;  // log |C(alpha, i)| and its sign, updated each step
  for (int64_t i = 0;; ++i) {
    COHORT_INTERNAL(i < 100000, "rdp: the fractional-order series did not converge (q ", q, ", z ",
                    z, ", order ", alpha, ")");
    const double di = double(i), j = alpha - di;
    const double log_t0 = log_coef + di * lq + j * l1q;
    const double log_t1 = log_coef + j * lq + di * l1q;
    const double log_e0 = std::log(0.5) + log_erfc((di - z0) / (M_SQRT2 * z));
    const double log_e1 = std::log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * z));
    const double log_s0 = log_t0 + (di * di - di) / (2 * z * z) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2 * z * z) + log_e1;
    if (sign > 0) {
      log_a0 = log_add(log_a0, log_s0);
      log_a1 = log_add(log_a1, log_s1);
    } else {
      log_a0 = log_sub(log_a0, log_s0);
      log_a1 = log_sub(log_a1, log_s1);
    }
    if (std::max(log_s0, log_s1) < -30) break;
    log_coef += std::log(std::abs(alpha - di)) - std::log(di + 1);
    if (alpha - di < 0) sign = -sign;
  }
  return log_add(log_a0, log_a1);
}

void check_order(double order) {
  COHORT_CHECK_ARG(order > 1 && std::isfinite(order), "RDP order must be a finite number > 1, got ",
                   order);
}

}  // namespace

double rdp_sampled_gaussian(double q, double noise_multiplier, double order) {
  const double z = noise_multiplier;
  COHORT_CHECK_ARG(q >= 0 && q <= 1, "fl.dp: sampling rate q must be in [0, 1], got ", q);
  COHORT_CHECK_ARG(z >= 0 && std::isfinite(z),
                   "fl.dp.noise_multiplier must be a finite number >= 0, got ", z);
  check_order(order);
  if (q == 0) return 0;
  if (z == 0) return kInf;  // the sum is released exactly: no finite privacy loss
  if (q == 1) return order / (2 * z * z);
  const double log_a =
      order == std::floor(order) ? log_a_int(q, z, int64_t(order)) : log_a_frac(q, z, order);
  return log_a / (order - 1);
}

EpsilonResult rdp_to_epsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                             double delta) {
  COHORT_CHECK_ARG(delta > 0 && delta < 1, "fl.dp.delta must be in (0, 1), got ", delta);
  COHORT_CHECK_ARG(!orders.empty() && orders.size() == rdp.size(),
                   "rdp_to_epsilon: ", orders.size(), " orders but ", rdp.size(), " RDP values");
  EpsilonResult best{kInf, orders[0]};
  for (size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k];
    // A sum of tiny positive terms can round to -1e-18; RDP itself is never negative.
    const double r = std::max(rdp[k], 0.0);
    double eps = kInf;
    if (std::isinf(r)) {
      eps = kInf;
    } else if (delta * delta + std::expm1(-r) > 0) {
      eps = 0;  // Pinsker-type: TV <= sqrt(1 - e^-KL) <= delta already, since KL <= D_alpha
    } else if (a > 1.01) {
      eps = r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    }
    if (eps < best.epsilon) best = {eps, a};
  }
  best.epsilon = std::max(best.epsilon, 0.0);
  return best;
}

std::vector<double> default_rdp_orders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 10.0);
  for (int a = 11; a <= 64; ++a) orders.push_back(a);
  orders.push_back(128);
  orders.push_back(256);
  return orders;
}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {
  COHORT_CHECK_ARG(!orders_.empty(), "RdpAccountant: no RDP orders given");
  for (double a : orders_) check_order(a);
}

void RdpAccountant::add_steps(double q, double noise_multiplier, int64_t steps) {
  COHORT_CHECK_ARG(steps >= 0, "RdpAccountant::add_steps: steps must be >= 0, got ", steps);
  std::vector<double> per_step(orders_.size());
  for (size_t k = 0; k < orders_.size(); ++k) {
    per_step[k] = rdp_sampled_gaussian(q, noise_multiplier, orders_[k]);  // validates q, z
  }
  if (steps == 0) return;  // after validation; and 0 * inf would be NaN
  for (size_t k = 0; k < orders_.size(); ++k) rdp_[k] += double(steps) * per_step[k];
  steps_ += steps;
  if (!history_.empty() && history_.back().q == q && history_.back().z == noise_multiplier) {
    history_.back().steps += steps;
  } else {
    history_.push_back({q, noise_multiplier, steps});
  }
}

RdpAccountant::Result RdpAccountant::epsilon(double delta) const {
  return rdp_to_epsilon(orders_, rdp_, delta);
}

nlohmann::json RdpAccountant::to_json() const {
  nlohmann::json rdp = nlohmann::json::array(), history = nlohmann::json::array();
  for (double r : rdp_) rdp.push_back(std::isinf(r) ? nlohmann::json(nullptr) : nlohmann::json(r));
  for (const Entry& e : history_) history.push_back({{"q", e.q}, {"z", e.z}, {"steps", e.steps}});
  return {{"orders", orders_}, {"rdp", rdp}, {"steps", steps_}, {"history", history}};
}

RdpAccountant RdpAccountant::from_json(const nlohmann::json& j) {
  try {
    RdpAccountant acc(j.at("orders").get<std::vector<double>>());
    const auto& rdp = j.at("rdp");
    COHORT_CHECK_ARG(rdp.is_array() && rdp.size() == acc.orders_.size(),
                     "RdpAccountant: ", acc.orders_.size(), " orders but ", rdp.size(),
                     " RDP values");
    for (size_t k = 0; k < rdp.size(); ++k) {
      acc.rdp_[k] = rdp[k].is_null() ? kInf : rdp[k].get<double>();
      COHORT_CHECK_ARG(acc.rdp_[k] >= 0, "RdpAccountant: negative RDP ", acc.rdp_[k], " at order ",
                       acc.orders_[k]);
    }
    acc.steps_ = j.value("steps", int64_t(0));
    for (const auto& e : j.value("history", nlohmann::json::array())) {
      acc.history_.push_back(
          {e.at("q").get<double>(), e.at("z").get<double>(), e.at("steps").get<int64_t>()});
    }
    return acc;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("RdpAccountant::from_json: malformed state: ") + e.what());
  }
}

}  // namespace cohort::federated
