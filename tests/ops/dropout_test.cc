#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::contains;
using testing::gradcheck;
using testing::invalid_argument_message;

TEST(Dropout, ZeroProbabilityIsIdentity) {
  Tensor x = randn({3, 4}, 1);
  EXPECT_TRUE(ops::dropout(x, 0.0, 7).same(x));
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesTheRest) {
  const int64_t n = 200000;
  const double p = 0.3;
  std::vector<float> y = ops::dropout(ones({n}), p, 42).to_vector<float>();
  int64_t zeros_seen = 0;
  double total = 0;
  for (float v : y) {
    if (v == 0.0f) {
      ++zeros_seen;
    } else {
      ASSERT_FLOAT_EQ(v, float(1.0 / (1.0 - p)));
    }
    total += v;
  }
  // Binomial(n, p): standard deviation ~0.001 of n; allow 5 sigma.
  EXPECT_NEAR(double(zeros_seen) / n, p, 0.005);
  EXPECT_NEAR(total / n, 1.0, 0.01);  // expectation preserved
}

TEST(Dropout, MaskIsPhiloxAtTheElementIndex) {
  const uint64_t seed = 123;
  const float p = 0.5f;
  Tensor x = randn({7, 9}, 2);
  std::vector<float> xv = x.to_vector<float>(), y = ops::dropout(x, p, seed).to_vector<float>();
  Philox rng(seed);
  for (size_t i = 0; i < xv.size(); ++i) {
    bool keep = rng.uniform(i) >= p;
    EXPECT_EQ(y[i], keep ? xv[i] * 2.0f : 0.0f) << i;
  }
}

TEST(Dropout, DeterministicPerSeedAndAcrossThreadCounts) {
  Tensor x = randn({100003}, 3);  // not a multiple of 4: tail block
  set_num_threads(1);
  std::vector<float> one = ops::dropout(x, 0.25, 9).to_vector<float>();
  set_num_threads(2);
  std::vector<float> two = ops::dropout(x, 0.25, 9).to_vector<float>();
  std::vector<float> again = ops::dropout(x, 0.25, 9).to_vector<float>();
  set_num_threads(0);
  EXPECT_EQ(one, two);
  EXPECT_EQ(two, again);
  EXPECT_NE(one, ops::dropout(x, 0.25, 10).to_vector<float>());
}

TEST(Dropout, GradientUsesTheSameMask) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::dropout(in[0], 0.4, 5); }, {randn({4, 6}, 1)}));
  Tensor x = randn({50}, 2).set_requires_grad(true);
  Tensor y = ops::dropout(x, 0.5, 11);
  y.backward(ones({50}));
  std::vector<float> yv = y.to_vector<float>(), gv = x.grad().to_vector<float>();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(gv[i], yv[i] == 0.0f ? 0.0f : 2.0f) << i;
}

TEST(Dropout, ProbabilityOutsideRangeIsRejected) {
  Tensor x = randn({4}, 1);
  EXPECT_EQ(invalid_argument_message([&] { ops::dropout(x, 1.0, 1); }),
            "dropout: p must be in [0, 1), got 1");
  EXPECT_TRUE(contains(invalid_argument_message([&] { ops::dropout(x, -0.1, 1); }),
                       "dropout: p must be in [0, 1), got -0.1"));
  EXPECT_TRUE(contains(invalid_argument_message(
                           [&] { ops::dropout(x, std::numeric_limits<double>::quiet_NaN(), 1); }),
                       "dropout: p must be in [0, 1)"));
}

}  // namespace
}  // namespace cohort
