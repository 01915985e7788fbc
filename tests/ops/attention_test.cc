#include <gtest/gtest.h>

#include <cmath>

#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;
using testing::invalid_argument_message;

// softmax(Q K^T / sqrt(Dh) + M) V with an explicit mask M (-inf above the diagonal), in double.
std::vector<float> naive_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t bh = q.size(0) * q.size(1), t = q.size(2), d = q.size(3);
  std::vector<float> qv = q.to_vector<float>(), kv = k.to_vector<float>(),
                     vv = v.to_vector<float>(), out(qv.size());
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t h = 0; h < bh; ++h) {
    const size_t base = size_t(h * t * d);
    std::vector<double> s(size_t(t * t));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += double(qv[base + size_t(i * d + c)]) * kv[base + size_t(j * d + c)];
        s[size_t(i * t + j)] = dot * scale + (j > i ? -INFINITY : 0.0);
      }
    for (int64_t i = 0; i < t; ++i) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < t; ++j) m = std::max(m, s[size_t(i * t + j)]);
      for (int64_t j = 0; j < t; ++j)
        sum += (s[size_t(i * t + j)] = std::exp(s[size_t(i * t + j)] - m));
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < t; ++j)
          o += s[size_t(i * t + j)] / sum * vv[base + size_t(j * d + c)];
        out[base + size_t(i * d + c)] = float(o);
      }
    }
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(CausalAttention, MatchesMaskedSoftmaxReference) {
  Tensor q = randn({2, 3, 7, 10}, 1), k = randn({2, 3, 7, 10}, 2), v = randn({2, 3, 7, 10}, 3);
  Tensor y = ops::causal_attention(q, k, v);
  EXPECT_EQ(y.shape(), q.shape());
  expect_near(y.to_vector<float>(), naive_attention(q, k, v), 1e-5f);
}

TEST(CausalAttention, FuturePositionsDoNotLeak) {
  Tensor q = randn({1, 2, 6, 4}, 1), k = randn({1, 2, 6, 4}, 2), v = randn({1, 2, 6, 4}, 3);
  std::vector<float> base = ops::causal_attention(q, k, v).to_vector<float>();
  // Change k and v at the last position only: rows 0..4 must not move.
  std::vector<float> kv = k.to_vector<float>(), vv = v.to_vector<float>();
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c)
      kv[size_t((h * 6 + 5) * 4 + c)] += 5, vv[size_t((h * 6 + 5) * 4 + c)] -= 3;
  std::vector<float> changed =
      ops::causal_attention(q, from_vector(kv, k.shape()), from_vector(vv, v.shape()))
          .to_vector<float>();
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 5 * 4; ++i)
      EXPECT_EQ(changed[size_t(h * 24 + i)], base[size_t(h * 24 + i)]);
  EXPECT_NE(changed, base);
}

TEST(CausalAttention, StridedViewsOfAFusedProjection) {
  // qkv [B, T, 3, H, Dh] as one projection would produce; q, k, v are permuted slices of it.
  const int64_t b = 2, t = 5, h = 2, d = 3;
  Tensor qkv = randn({b, t, 3, h, d}, 4);
  auto part = [&](int64_t i) {
    return qkv.slice(2, i, i + 1).reshape({b, t, h, d}).permute({0, 2, 1, 3});
  };
  Tensor q = part(0), k = part(1), v = part(2);
  ASSERT_FALSE(q.is_contiguous());
  expect_near(
      ops::causal_attention(q, k, v).to_vector<float>(),
      ops::causal_attention(q.contiguous(), k.contiguous(), v.contiguous()).to_vector<float>(),
      0.0f);
}

TEST(CausalAttention, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::causal_attention(in[0], in[1], in[2]); },
                        {randn({1, 2, 4, 3}, 1), randn({1, 2, 4, 3}, 2), randn({1, 2, 4, 3}, 3)}));
  // Strided inputs get gradients of their own shape.
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        return ops::causal_attention(in[0].transpose(1, 2), in[1].transpose(1, 2),
                                     in[2].transpose(1, 2));
      },
      {randn({2, 3, 2, 4}, 4), randn({2, 3, 2, 4}, 5), randn({2, 3, 2, 4}, 6)}));
}

TEST(CausalAttention, GradientsIndependentOfThreadCount) {
  Tensor q = randn({2, 4, 9, 8}, 1).set_requires_grad(true);
  Tensor k = randn({2, 4, 9, 8}, 2).set_requires_grad(true);
  Tensor v = randn({2, 4, 9, 8}, 3).set_requires_grad(true);
  std::vector<float> grads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    q.set_grad(Tensor());
    ops::causal_attention(q, k, v).backward(randn(q.shape(), 4));
    grads[threads - 1] = q.grad().to_vector<float>();
  }
  set_num_threads(0);
  EXPECT_EQ(grads[0], grads[1]);
}

TEST(CausalAttention, ShapeErrorsNameAllShapes) {
  EXPECT_EQ(invalid_argument_message([] {
              ops::causal_attention(randn({1, 2, 4, 3}, 1), randn({1, 2, 5, 3}, 2),
                                    randn({1, 2, 4, 3}, 3));
            }),
            "causal_attention: q [1, 2, 4, 3], k [1, 2, 5, 3] and v [1, 2, 4, 3] must have the "
            "same shape [B, H, T, Dh]");
  EXPECT_EQ(invalid_argument_message([] {
              Tensor x = randn({2, 4, 3}, 1);
              ops::causal_attention(x, x, x);
            }),
            "causal_attention: q must be 4-D [B, H, T, Dh], got [2, 4, 3]");
}

}  // namespace
}  // namespace cohort
