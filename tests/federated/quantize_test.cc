// Fixed point in Z_2^64: a round trip loses at most half a step, and the wrap-around sum of
// encodings decodes to the true sum within n steps, negative values included.
#include "cohort/federated/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Quantize, RoundTripIsWithinHalfAStep) {
  for (int f : {0, 8, 20, 40}) {
    const auto x = random_floats(1000, 100.f, f);
    std::vector<uint64_t> q(x.size());
    std::vector<float> back(x.size());
    quantize(x, f, q);
    dequantize(q, f, back);
    for (size_t i = 0; i < x.size(); ++i) {
      // Half a step of rounding, plus the float rounding of the decoded value.
      const double tol = std::ldexp(1.0, -f - 1) + std::abs(x[i]) * 0x1p-24;
      ASSERT_NEAR(back[i], x[i], tol) << "frac_bits " << f << " index " << i;
    }
  }
}

TEST(Quantize, NegativeValuesAreTwosComplement) {
  std::vector<float> x{-1.f, 1.f, -0.5f, 0.f};
  std::vector<uint64_t> q(4);
  quantize(x, 1, q);
  EXPECT_EQ(q[0], static_cast<uint64_t>(-2));
  EXPECT_EQ(q[1], 2u);
  EXPECT_EQ(q[2], static_cast<uint64_t>(-1));
  EXPECT_EQ(q[3], 0u);
}

TEST(Quantize, SumOfQuantizedDecodesToTheSumWithinNSteps) {
  const int n = 10, f = 16;
  const size_t len = 500;
  std::vector<uint64_t> acc(len, 0), q(len);
  std::vector<double> truth(len, 0.0);
  for (int u = 0; u < n; ++u) {
    const auto x = random_floats(len, 50.f, 100 + u);
    quantize(x, f, q);
    for (size_t i = 0; i < len; ++i) {
      acc[i] += q[i];  // wraps exactly like the secure aggregation ring
      truth[i] += x[i];
    }
  }
  std::vector<float> sum(len);
  dequantize(acc, f, sum);
  for (size_t i = 0; i < len; ++i) {
    const double tol = n * std::ldexp(1.0, -f) + std::abs(truth[i]) * 0x1p-24;
    ASSERT_NEAR(sum[i], truth[i], tol) << "index " << i;
  }
}

TEST(Quantize, UnrepresentableInputsAreInvalidArgument) {
  std::vector<uint64_t> q(1);
  std::vector<float> out(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf, -inf, 1e10f}) {
    std::vector<float> x{bad};
    EXPECT_THROW(quantize(x, 40, q), InvalidArgument) << bad;
  }
  std::vector<float> ok{1.f};
  EXPECT_THROW(quantize(ok, -1, q), InvalidArgument);
  EXPECT_THROW(quantize(ok, 63, q), InvalidArgument);
  std::vector<uint64_t> two(2);
  EXPECT_THROW(quantize(ok, 8, two), InvalidArgument);
  EXPECT_THROW(dequantize(two, 8, out), InvalidArgument);
}

}  // namespace
}  // namespace cohort::federated
