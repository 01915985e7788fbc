#pragma once
// Rényi-DP accounting for the sampled Gaussian mechanism, as in TF-Privacy and Opacus.
//
// One DP-FedAvg round (or one DP-SGD step) samples each user with probability q and adds
// Gaussian noise of stddev z times the sensitivity. Its Rényi divergence of order alpha
// (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism",
// arXiv:1908.10530) is
//   D_alpha(mu1 || mu0),  mu0 = N(0, z^2),  mu1 = (1 - q) N(0, z^2) + q N(1, z^2),
// which bounds the other direction too (their Theorem 4), so it is the mechanism's RDP.
// RDP composes by addition over rounds; at the end it converts to (epsilon, delta)-DP,
// minimising over a grid of orders.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::federated {

// RDP of one round at `order` (> 1). Integer orders: the exact binomial expansion
//   A_alpha = sum_{i=0}^{alpha} C(alpha, i) (1-q)^(alpha-i) q^i exp((i^2 - i) / (2 z^2)),
// summed in log space (log-sum-exp); fractional orders: the paper's two convergent series
// (Section 3.3), summed in log space until both terms fall below e^-30, as TF-Privacy does.
// Returns log(A_alpha) / (alpha - 1). Special cases: q = 0 gives 0; z = 0 gives +infinity (no
// noise, no privacy); q = 1 is the plain Gaussian mechanism, alpha / (2 z^2).
double rdp_sampled_gaussian(double q, double noise_multiplier, double order);

// Converts a total RDP curve to epsilon at `delta`, minimising over the orders. Uses the
// conversion of Balle, Barthe, Gaboardi, Hsu, Sato 2020 ("Hypothesis testing interpretations and
// Rényi differential privacy", Theorem 21), also Canonne, Kamath, Steinke 2020 Prop. 12:
//   eps = rdp + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1),
// the one Opacus and TF-Privacy use; it is tighter than Mironov's rdp + log(1/delta)/(alpha-1)
// by roughly log(alpha)/(alpha - 1). Orders <= 1.01 are skipped (the bound is unstable there);
// when delta^2 + expm1(-rdp) > 0 epsilon is 0 (the KL bound on total variation already gives
// delta). epsilon is never below 0.
struct EpsilonResult {
  double epsilon;
  double order;  // the order at which the minimum was reached
};
EpsilonResult rdp_to_epsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                             double delta);

// 1.1, 1.2, ..., 10.9 (fractional orders decide epsilon when it is small), then 11, ..., 64,
// 128, 256 (large orders decide it when the noise is large): Opacus's grid (1.1 ... 10.9,
// 12 ... 63) with 11, 64, 128 and 256 added.
std::vector<double> default_rdp_orders();

class RdpAccountant {
 public:
  explicit RdpAccountant(std::vector<double> orders = default_rdp_orders());

  // Composes `steps` rounds of the sampled Gaussian mechanism (q in [0, 1], z >= 0).
  void add_steps(double q, double noise_multiplier, int64_t steps);

  using Result = EpsilonResult;
  Result epsilon(double delta) const;  // delta in (0, 1)

  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }
  int64_t steps() const { return steps_; }

  // {"orders": [...], "rdp": [...], "steps": n, "history": [{"q", "z", "steps"}, ...]}. An
  // infinite RDP (z = 0) is written as null, JSON having no infinity. Doubles round-trip
  // exactly, so a resumed server continues the very same sum.
  nlohmann::json to_json() const;
  static RdpAccountant from_json(const nlohmann::json& j);

 private:
  struct Entry {
    double q, z;
    int64_t steps;
  };
  std::vector<double> orders_;
  std::vector<double> rdp_;  // total RDP at each order
  int64_t steps_ = 0;
  std::vector<Entry> history_;  // consecutive add_steps with the same (q, z) are merged
};

}  // namespace cohort::federated
