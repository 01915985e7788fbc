// The RDP accountant against an independent computation: the sampled Gaussian mechanism's
// Rényi divergence by direct numerical integration of the two densities, sharing no code or
// formula with the library's binomial sum and erfc series.
#include "cohort/federated/rdp_accountant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Direction { kMixtureFirst, kGaussianFirst };

// D_alpha(P || Q) = log(integral P^alpha Q^(1-alpha)) / (alpha - 1) with mu0 = N(0, z^2),
// mu1 = (1-q) N(0, z^2) + q N(1, z^2); kMixtureFirst is (P, Q) = (mu1, mu0).
//
// Written as the integral of mu0(x) r(x)^p with r = mu1 / mu0 = (1-q) + q exp((2x - 1) / (2z^2))
// and p = alpha (forward) or 1 - alpha (reverse), everything in logs: at alpha = 256, z = 0.8
// the integrand reaches e^50000. Trapezoid rule on a grid of step z/64 over [-16z, alpha + 16z]
// (the forward integrand peaks near x = alpha, width z); the trapezoid rule is spectrally
// accurate for such smooth, fast-decaying integrands. The same grid's integral of mu0 alone
// (1 up to the discretisation) is subtracted, cancelling what error there is.
double numeric_rdp(double q, double z, double alpha, Direction dir) {
  const double p = dir == Direction::kMixtureFirst ? alpha : 1 - alpha;
  const double h = z / 64, lo = -16 * z - 1, hi = alpha + 16 * z + 1;
  const int64_t n = int64_t((hi - lo) / h) + 1;
  std::vector<double> f(static_cast<size_t>(n)), g(static_cast<size_t>(n));
  double fmax = -kInf, gmax = -kInf;
  for (int64_t k = 0; k < n; ++k) {
    const double x = lo + double(k) * h;
    const double log_mu0 = -x * x / (2 * z * z);  // the constant cancels in the difference
    const double t = std::log(q) + (2 * x - 1) / (2 * z * z), u = std::log1p(-q);
    const double log_r = std::max(t, u) + std::log1p(std::exp(-std::abs(t - u)));
    f[size_t(k)] = log_mu0 + p * log_r;
    g[size_t(k)] = log_mu0;
    fmax = std::max(fmax, f[size_t(k)]);
    gmax = std::max(gmax, g[size_t(k)]);
  }
  double sf = 0, sg = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double w = (k == 0 || k == n - 1) ? 0.5 : 1.0;
    sf += w * std::exp(f[size_t(k)] - fmax);
    sg += w * std::exp(g[size_t(k)] - gmax);
  }
  const double log_ratio = (fmax + std::log(sf)) - (gmax + std::log(sg));
  return log_ratio / (alpha - 1);
}

// The Balle et al. 2020 conversion, restated here rather than called, then minimised.
double numeric_epsilon(double q, double z, int64_t rounds, double delta) {
  double best = kInf;
  for (double a : default_rdp_orders()) {
    const double rdp = double(rounds) * numeric_rdp(q, z, a, Direction::kMixtureFirst);
    if (a <= 1.01) continue;
    best = std::min(best, rdp + std::log((a - 1) / a) - (std::log(delta) + std::log(a)) / (a - 1));
  }
  return std::max(best, 0.0);
}

// Every order of the default grid (fractional 1.1 ... 10.9 through the series, integers through
// the binomial sum, up to 256). The issue asks for 1%; the two agree to about 1e-8, so the test
// holds them to 1e-6, which a wrong term or a truncated series would not meet.
TEST(RdpSampledGaussian, MatchesNumericalIntegration) {
  for (double q : {0.01, 0.1, 0.5}) {
    for (double z : {0.8, 1.1, 2.0, 4.0}) {
      for (double a : default_rdp_orders()) {
        const double lib = rdp_sampled_gaussian(q, z, a);
        const double fwd = numeric_rdp(q, z, a, Direction::kMixtureFirst);
        const double rev = numeric_rdp(q, z, a, Direction::kGaussianFirst);
        EXPECT_NEAR(lib, fwd, 1e-6 * fwd) << "q " << q << " z " << z << " order " << a;
        // The paper's Theorem 4: the mixture-first direction is the larger, so it is the RDP.
        EXPECT_LE(rev, fwd * (1 + 1e-9)) << "q " << q << " z " << z << " order " << a;
      }
    }
  }
}

TEST(RdpSampledGaussian, SpecialCases) {
  EXPECT_EQ(rdp_sampled_gaussian(0.0, 1.0, 8), 0.0);
  EXPECT_EQ(rdp_sampled_gaussian(0.3, 0.0, 8), kInf);
  for (double a : {1.5, 2.0, 7.0, 32.0}) {
    for (double z : {0.5, 1.0, 3.0}) {
      EXPECT_DOUBLE_EQ(rdp_sampled_gaussian(1.0, z, a), a / (2 * z * z));
      // q -> 1 through the general formulas meets the Gaussian mechanism.
      EXPECT_NEAR(rdp_sampled_gaussian(1 - 1e-9, z, a), a / (2 * z * z), 1e-5 * a / (z * z));
    }
  }
  EXPECT_THROW(rdp_sampled_gaussian(1.5, 1.0, 2), InvalidArgument);
  EXPECT_THROW(rdp_sampled_gaussian(0.5, -1.0, 2), InvalidArgument);
  EXPECT_THROW(rdp_sampled_gaussian(0.5, 1.0, 1.0), InvalidArgument);
}

TEST(RdpAccountant, EpsilonMatchesTheNumericalCurveWithinOnePercent) {
  struct Case {
    double q, z;
    int64_t rounds;
    double delta;
  };
  for (Case c :
       {Case{0.5, 0.8, 10, 1e-5}, Case{0.5, 1.1, 30, 1e-5}, Case{0.5, 2.0, 100, 1e-5},
        Case{0.1, 1.1, 100, 1e-5}, Case{0.01, 1.1, 1000, 1e-5}, Case{0.01, 4.0, 10000, 1e-6}}) {
    RdpAccountant acc;
    acc.add_steps(c.q, c.z, c.rounds);
    const double eps = acc.epsilon(c.delta).epsilon;
    const double ref = numeric_epsilon(c.q, c.z, c.rounds, c.delta);
    EXPECT_NEAR(eps, ref, 0.01 * ref) << "q " << c.q << " z " << c.z << " rounds " << c.rounds;
  }
}

// Published values: TF-Privacy's MNIST tutorial README (tensorflow/privacy, tutorials/README.md)
// reports eps at delta = 1e-5 for N = 60000, batch 256 (q = 256/60000), steps =
// ceil(epochs * N / batch), computed with the RDP curve this library computes, its orders
// 1.1 ... 10.9, 12 ... 63, and the older conversion eps = rdp + log(1/delta)/(alpha - 1)
// (Mironov 2017), restated here. Two decimals published, so +-0.006.
TEST(RdpAccountant, ReproducesTfPrivacyPublishedEpsilons) {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders.push_back(a);
  struct Case {
    double z;
    int epochs;
    double published;
  };
  for (Case c : {Case{1.3, 15, 1.19}, Case{1.1, 60, 3.01}, Case{0.7, 45, 7.10}}) {
    RdpAccountant acc(orders);
    acc.add_steps(256.0 / 60000, c.z, int64_t(std::ceil(c.epochs * 60000.0 / 256)));
    double eps = kInf;
    for (size_t k = 0; k < orders.size(); ++k) {
      eps = std::min(eps, acc.rdp()[k] + std::log(1e5) / (orders[k] - 1));
    }
    EXPECT_NEAR(eps, c.published, 0.006) << "z " << c.z << " epochs " << c.epochs;
    // The tighter conversion the accountant uses gives less.
    EXPECT_LT(acc.epsilon(1e-5).epsilon, eps);
  }
}

TEST(RdpAccountant, ComposesByAdditionAndIsMonotone) {
  RdpAccountant once, twice;
  once.add_steps(0.1, 1.1, 200);
  twice.add_steps(0.1, 1.1, 120);
  twice.add_steps(0.1, 1.1, 80);
  for (size_t k = 0; k < once.rdp().size(); ++k) {
    EXPECT_NEAR(once.rdp()[k], twice.rdp()[k], 1e-12 * once.rdp()[k]);
  }
  EXPECT_EQ(twice.steps(), 200);
  RdpAccountant more = once;
  more.add_steps(0.1, 1.1, 100);
  EXPECT_GT(more.epsilon(1e-5).epsilon, once.epsilon(1e-5).epsilon);
  EXPECT_GT(once.epsilon(1e-6).epsilon, once.epsilon(1e-5).epsilon);
  RdpAccountant noisier;
  noisier.add_steps(0.1, 2.0, 200);
  EXPECT_LT(noisier.epsilon(1e-5).epsilon, once.epsilon(1e-5).epsilon);
}

TEST(RdpAccountant, NoStepsOrNoSamplingIsZeroAndNoNoiseIsInfinite) {
  RdpAccountant acc;
  EXPECT_EQ(acc.epsilon(1e-5).epsilon, 0.0);
  acc.add_steps(0.0, 1.0, 1000);
  EXPECT_EQ(acc.epsilon(1e-5).epsilon, 0.0);
  acc.add_steps(0.1, 0.0, 1);
  EXPECT_EQ(acc.epsilon(1e-5).epsilon, kInf);
  EXPECT_THROW(acc.epsilon(0.0), InvalidArgument);
  EXPECT_THROW(acc.epsilon(1.0), InvalidArgument);
  EXPECT_THROW(acc.add_steps(0.1, 1.0, -1), InvalidArgument);
  EXPECT_THROW(RdpAccountant({0.5, 2.0}), InvalidArgument);
  EXPECT_THROW(RdpAccountant(std::vector<double>{}), InvalidArgument);
}

TEST(RdpAccountant, JsonRoundTripContinuesTheSameSum) {
  RdpAccountant a;
  a.add_steps(0.5, 1.1, 7);
  a.add_steps(0.2, 2.0, 3);
  RdpAccountant b = RdpAccountant::from_json(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(b.orders(), a.orders());
  EXPECT_EQ(b.rdp(), a.rdp());  // bit-identical: a resumed server continues the very same sum
  EXPECT_EQ(b.steps(), 10);
  EXPECT_EQ(b.to_json(), a.to_json());
  a.add_steps(0.5, 1.1, 5);
  b.add_steps(0.5, 1.1, 5);
  EXPECT_EQ(a.epsilon(1e-5).epsilon, b.epsilon(1e-5).epsilon);

  RdpAccountant inf;
  inf.add_steps(0.5, 0.0, 1);
  EXPECT_EQ(RdpAccountant::from_json(inf.to_json()).epsilon(1e-5).epsilon, kInf);
  EXPECT_THROW(RdpAccountant::from_json({{"orders", {2.0}}}), InvalidArgument);
  EXPECT_THROW(RdpAccountant::from_json({{"orders", {2.0}}, {"rdp", {1.0, 2.0}}}), InvalidArgument);
}

// The table docs/federated_privacy.md shows, printed so the doc can be regenerated; epsilon
// grows with the rounds and falls as the noise grows.
TEST(RdpAccountant, DocTableIsMonotone) {
  double prev_z = kInf;
  for (double z : {0.8, 1.1, 2.0}) {
    double prev_rounds = 0;
    for (int64_t rounds : {10, 30, 100}) {
      RdpAccountant acc;
      acc.add_steps(0.5, z, rounds);
      auto r = acc.epsilon(1e-5);
      std::printf("q 0.5  z %.1f  rounds %3lld  delta 1e-5  eps %8.3f  (order %g)\n", z,
                  (long long)rounds, r.epsilon, r.order);
      EXPECT_GT(r.epsilon, prev_rounds);
      prev_rounds = r.epsilon;
    }
    EXPECT_LT(prev_rounds, prev_z);
    prev_z = prev_rounds;
  }
}

}  // namespace
}  // namespace cohort::federated
