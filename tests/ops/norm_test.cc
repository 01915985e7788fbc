#include <gtest/gtest.h>

#include <cmath>

#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::contains;
using testing::gradcheck;
using testing::invalid_argument_message;

TEST(LayerNorm, MatchesTheDefinition) {
  const int64_t rows = 6, d = 37;  // d not a multiple of 8: exercises the tails
  Tensor x = randn({2, 3, d}, 1);
  Tensor w = randn({d}, 2), b = randn({d}, 3);
  Tensor y = ops::layer_norm(x, w, b, 1e-5);
  ASSERT_EQ(y.shape(), x.shape());
  std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>(),
                     bv = b.to_vector<float>(), yv = y.to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xv[size_t(r * d + i)];
    mean /= double(d);
    for (int64_t i = 0; i < d; ++i) var += std::pow(xv[size_t(r * d + i)] - mean, 2);
    var /= double(d);
    for (int64_t i = 0; i < d; ++i) {
      double want =
          (xv[size_t(r * d + i)] - mean) / std::sqrt(var + 1e-5) * wv[size_t(i)] + bv[size_t(i)];
      ASSERT_NEAR(yv[size_t(r * d + i)], want, 1e-4) << "row " << r << " col " << i;
    }
  }
}

TEST(LayerNorm, WithoutAffineRowsHaveZeroMeanUnitVariance) {
  std::vector<float> xv = randn({4, 64}, 5).to_vector<float>();
  for (float& v : xv) v = 3.0f * v + 7.0f;  // far from zero mean, unit variance
  Tensor y = ops::layer_norm(from_vector(xv, {4, 64}), Tensor(), Tensor());
  std::vector<float> v = y.to_vector<float>();
  for (int r = 0; r < 4; ++r) {
    double m = 0, sq = 0;
    for (int i = 0; i < 64; ++i)
      m += v[size_t(r * 64 + i)], sq += std::pow(v[size_t(r * 64 + i)], 2);
    EXPECT_NEAR(m / 64, 0.0, 1e-5);
    EXPECT_NEAR(sq / 64, 1.0, 1e-3);
  }
}

TEST(LayerNorm, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::layer_norm(in[0], in[1], in[2]); },
                        {randn({2, 3, 5}, 1), randn({5}, 2), randn({5}, 3)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::layer_norm(in[0], in[1], Tensor()); },
                        {randn({4, 9}, 4), randn({9}, 5)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::layer_norm(in[0].t(), Tensor(), in[1]); },
                        {randn({6, 3}, 6), randn({6}, 7)}));
}

TEST(LayerNorm, ShapeErrorsNameBothShapes) {
  EXPECT_EQ(invalid_argument_message([] {
              ops::layer_norm(randn({2, 8}, 1), randn({7}, 2), randn({8}, 3));
            }),
            "layer_norm: weight [7] does not match x [2, 8] (normalised dim 8)");
  EXPECT_EQ(invalid_argument_message([] {
              ops::layer_norm(randn({2, 8}, 1), randn({8}, 2), randn({2, 8}, 3));
            }),
            "layer_norm: bias [2, 8] does not match x [2, 8] (normalised dim 8)");
  EXPECT_TRUE(contains(invalid_argument_message([] {
                         ops::layer_norm(randn({2, 8}, 1), Tensor(), Tensor(), 0.0);
                       }),
                       "eps must be positive"));
}

}  // namespace
}  // namespace cohort
