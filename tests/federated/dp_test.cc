// DP-FedAvg's two per-round operations: clipping a client update and noising the sum.
#include "cohort/federated/dp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

double l2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

TEST(ClipL2, ScalesDownOnlyWhenAboveTheBound) {
  std::vector<float> v = {3, 4};  // norm 5
  EXPECT_DOUBLE_EQ(clip_l2(v, 10), 5);
  EXPECT_EQ(v, (std::vector<float>{3, 4}));  // untouched below the bound

  EXPECT_DOUBLE_EQ(clip_l2(v, 1), 5);
  EXPECT_NEAR(v[0], 0.6f, 1e-7);
  EXPECT_NEAR(v[1], 0.8f, 1e-7);
  EXPECT_NEAR(l2(v), 1.0, 1e-6);

  std::vector<float> zero(7, 0.0f);
  EXPECT_EQ(clip_l2(zero, 1), 0);
  EXPECT_EQ(zero, std::vector<float>(7, 0.0f));
}

TEST(ClipL2, LargeVectorKeepsItsDirection) {
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i)));
  std::vector<float> orig = v;
  double norm = clip_l2(v, 0.5);
  EXPECT_NEAR(norm, l2(orig), 1e-9 * norm);
  EXPECT_NEAR(l2(v), 0.5, 1e-6);
  for (size_t i = 0; i < v.size(); i += 997) EXPECT_NEAR(v[i], orig[i] * 0.5 / norm, 1e-7);
}

TEST(ClipL2, RejectsBadBoundAndNonFiniteUpdates) {
  std::vector<float> v = {1, 2};
  EXPECT_THROW(clip_l2(v, 0), InvalidArgument);
  EXPECT_THROW(clip_l2(v, -1), InvalidArgument);
  std::vector<float> nan = {1, std::nanf("")};
  EXPECT_THROW(clip_l2(nan, 1), InvalidArgument);
}

// 1e6 draws: the sample mean's standard error is sigma / 1000 and the sample std's about
// sigma / 1414, so 5e-3 sigma on each is some five of them. The kurtosis checks the tails are
// Gaussian: 3, with a standard error of about sqrt(24 / n) ~ 0.005, so 0.05 is ten of them.
TEST(GaussianNoise, MomentsOverAMillionDraws) {
  const double sigma = 2.5;
  std::vector<float> v(1000001, 1.0f);  // odd length: the last element uses half a block
  add_gaussian_noise(v, sigma, 99, 7);
  double s1 = 0, s2 = 0, s4 = 0;
  for (float x : v) s1 += x - 1.0;
  const double n = double(v.size()), mean = s1 / n;
  for (float x : v) {
    double d = x - 1.0 - mean;
    s2 += d * d;
    s4 += d * d * d * d;
  }
  const double var = s2 / n;
  EXPECT_NEAR(mean, 0, 5e-3 * sigma);
  EXPECT_NEAR(std::sqrt(var), sigma, 5e-3 * sigma);
  EXPECT_NEAR(s4 / n / (var * var), 3.0, 0.05);
}

TEST(GaussianNoise, DeterministicInSeedAndStream) {
  auto noise = [](uint64_t seed, uint64_t stream) {
    std::vector<float> v(1001, 0.0f);
    add_gaussian_noise(v, 1.0, seed, stream);
    return v;
  };
  EXPECT_EQ(noise(1, 2), noise(1, 2));
  EXPECT_NE(noise(1, 2), noise(1, 3));
  EXPECT_NE(noise(1, 2), noise(2, 2));
  // Element i depends only on (seed, stream, i): a prefix draws the same numbers.
  std::vector<float> head(10, 0.0f);
  add_gaussian_noise(head, 1.0, 1, 2);
  auto full = noise(1, 2);
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i], full[i]);
}

TEST(GaussianNoise, ZeroStddevIsANoOpAndNegativeIsAnError) {
  std::vector<float> v = {1, 2, 3};
  add_gaussian_noise(v, 0.0, 1, 1);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(add_gaussian_noise(v, -1.0, 1, 1), InvalidArgument);
}

}  // namespace
}  // namespace cohort::federated
