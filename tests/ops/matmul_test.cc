#include <gtest/gtest.h>

#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/ops/error_message.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::contains;
using testing::gradcheck;
using testing::invalid_argument_message;

// c[b] = a[b] x b[b] with plain loops in double; a [B, M, K] (b_shared: b is [K, N]).
std::vector<float> naive_bmm(const Tensor& a, const Tensor& b, int64_t batch, int64_t m, int64_t k,
                             int64_t n) {
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), out;
  const bool shared = b.dim() == 2;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += double(av[size_t((bi * m + i) * k + p)]) *
               bv[size_t((shared ? 0 : bi * k * n) + p * n + j)];
        out.push_back(float(s));
      }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}

TEST(Matmul, TwoDMatchesLoops) {
  Tensor a = randn({5, 7}, 1), b = randn({7, 4}, 2);
  Tensor c = ops::matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{5, 4}));
  expect_near(c.to_vector<float>(), naive_bmm(a, b, 1, 5, 7, 4), 1e-5f);
}

TEST(Matmul, StridedViewsGiveTheSameResultAsCopies) {
  Tensor at = randn({7, 5}, 3), bt = randn({4, 7}, 4), wide = randn({5, 12}, 5);
  Tensor a = at.t(), b = bt.t();  // transposed views: columns contiguous
  ASSERT_FALSE(a.is_contiguous());
  Tensor want = ops::matmul(a.contiguous(), b.contiguous());
  expect_near(ops::matmul(a, b).to_vector<float>(), want.to_vector<float>(), 1e-6f);
  // A column slice keeps unit inner stride but a longer row stride.
  Tensor s = wide.slice(1, 2, 9);
  expect_near(ops::matmul(s, b).to_vector<float>(),
              ops::matmul(s.contiguous(), b).to_vector<float>(), 1e-6f);
  // Neither rows nor columns contiguous: copied.
  Tensor every_other = randn({10, 14}, 6).slice(0, 0, 10, 2).slice(1, 0, 14, 2);
  expect_near(ops::matmul(every_other, b).to_vector<float>(),
              ops::matmul(every_other.contiguous(), b).to_vector<float>(), 1e-6f);
}

TEST(Matmul, BatchedAndBroadcastRhsMatchLoops) {
  Tensor a = randn({3, 4, 6}, 7), b = randn({3, 6, 5}, 8), w = randn({6, 5}, 9);
  Tensor c = ops::matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{3, 4, 5}));
  expect_near(c.to_vector<float>(), naive_bmm(a, b, 3, 4, 6, 5), 1e-5f);
  Tensor d = ops::matmul(a, w);
  EXPECT_EQ(d.shape(), (Shape{3, 4, 5}));
  expect_near(d.to_vector<float>(), naive_bmm(a, w, 3, 4, 6, 5), 1e-5f);
}

TEST(Matmul, BatchedResultIndependentOfThreadCount) {
  Tensor a = randn({16, 8, 8}, 10), b = randn({16, 8, 8}, 11);
  set_num_threads(1);
  std::vector<float> one = ops::matmul(a, b).to_vector<float>();
  set_num_threads(2);
  std::vector<float> two = ops::matmul(a, b).to_vector<float>();
  set_num_threads(0);
  EXPECT_EQ(one, two);
}

TEST(Matmul, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::matmul(in[0], in[1]); },
                        {randn({3, 4}, 1), randn({4, 2}, 2)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::matmul(in[0].t(), in[1].t()); },
                        {randn({4, 3}, 3), randn({2, 4}, 4)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::matmul(in[0], in[1]); },
                        {randn({2, 3, 4}, 5), randn({2, 4, 3}, 6)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::matmul(in[0], in[1]); },
                        {randn({2, 3, 4}, 7), randn({4, 2}, 8)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::matmul(in[0].transpose(1, 2), in[1]); },
                        {randn({2, 4, 3}, 9), randn({2, 4, 2}, 10)}));
}

TEST(Matmul, ShapeErrorsNameBothShapes) {
  std::string msg = invalid_argument_message([] {
    ops::matmul(randn({2, 3}, 1), randn({4, 5}, 2));
  });
  EXPECT_TRUE(contains(msg, "matmul: a [2, 3] and b [4, 5] do not match"));
  msg = invalid_argument_message([] { ops::matmul(randn({2, 2, 3}, 1), randn({3, 3, 4}, 2)); });
  EXPECT_TRUE(contains(msg, "batch sizes differ: a [2, 2, 3] and b [3, 3, 4]"));
  msg = invalid_argument_message([] { ops::matmul(randn({3}, 1), randn({3, 4}, 2)); });
  EXPECT_TRUE(contains(msg, "unsupported ranks: a [3] and b [3, 4]"));
  msg = invalid_argument_message([] { ops::matmul(randn({2, 3}, 1), randn({2, 3, 4}, 2)); });
  EXPECT_TRUE(contains(msg, "unsupported ranks"));
  msg = invalid_argument_message([] {
    ops::matmul(arange(6, DType::i64).reshape({2, 3}), randn({3, 4}, 2));
  });
  EXPECT_TRUE(contains(msg, "matmul: a must be float32, got int64"));
}

TEST(Matmul, EmptyInnerDimGivesZeros) {
  Tensor c = ops::matmul(zeros({3, 0}), zeros({0, 2}));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(6, 0.0f));
}

// y = x W^T + b with loops, x [R, in].
std::vector<float> naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t in = w.size(1), out = w.size(0), rows = x.numel() / in;
  std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>(), y;
  std::vector<float> bv = b.defined() ? b.to_vector<float>() : std::vector<float>(size_t(out), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bv[size_t(o)];
      for (int64_t i = 0; i < in; ++i) s += double(xv[size_t(r * in + i)]) * wv[size_t(o * in + i)];
      y.push_back(float(s));
    }
  return y;
}

TEST(Linear, MatchesLoopsWithAndWithoutBias) {
  Tensor x = randn({6, 5}, 1), w = randn({3, 5}, 2), b = randn({3}, 3);
  expect_near(ops::linear(x, w, b).to_vector<float>(), naive_linear(x, w, b), 1e-5f);
  expect_near(ops::linear(x, w).to_vector<float>(), naive_linear(x, w, Tensor()), 1e-5f);
  Tensor x3 = randn({2, 4, 5}, 4);
  Tensor y3 = ops::linear(x3, w, b);
  EXPECT_EQ(y3.shape(), (Shape{2, 4, 3}));
  expect_near(y3.to_vector<float>(), naive_linear(x3, w, b), 1e-5f);
  Tensor x1 = randn({5}, 5);
  EXPECT_EQ(ops::linear(x1, w, b).shape(), (Shape{3}));
  expect_near(ops::linear(x1, w, b).to_vector<float>(), naive_linear(x1, w, b), 1e-5f);
  Tensor xt = randn({5, 6}, 6).t();  // transposed input view, used in place
  expect_near(ops::linear(xt, w, b).to_vector<float>(), naive_linear(xt.contiguous(), w, b), 1e-5f);
}

TEST(Linear, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::linear(in[0], in[1], in[2]); },
                        {randn({4, 5}, 1), randn({3, 5}, 2), randn({3}, 3)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::linear(in[0], in[1]); },
                        {randn({2, 3, 4}, 4), randn({2, 4}, 5)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::linear(in[0].t(), in[1], in[2]); },
                        {randn({5, 4}, 6), randn({3, 5}, 7), randn({3}, 8)}));
}

TEST(Linear, FirstLayerInputGetsNoGradient) {
  Tensor x = randn({4, 5}, 1);  // data: no requires_grad
  Tensor w = randn({3, 5}, 2).set_requires_grad(true), b = randn({3}, 3).set_requires_grad(true);
  Tensor g = randn({4, 3}, 4);
  ops::linear(x, w, b).backward(g);
  EXPECT_FALSE(x.grad().defined());
  // dW = g^T x and db = column sums of g, against loops.
  std::vector<float> gv = g.to_vector<float>(), xv = x.to_vector<float>();
  std::vector<float> dw(15, 0), db(3, 0);
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 3; ++o) {
      db[size_t(o)] += gv[size_t(r * 3 + o)];
      for (int i = 0; i < 5; ++i)
        dw[size_t(o * 5 + i)] += gv[size_t(r * 3 + o)] * xv[size_t(r * 5 + i)];
    }
  expect_near(w.grad().to_vector<float>(), dw, 1e-5f);
  expect_near(b.grad().to_vector<float>(), db, 1e-5f);
}

TEST(Linear, ShapeErrorsNameBothShapes) {
  EXPECT_EQ(invalid_argument_message([] {
              ops::linear(randn({64, 783}, 1), randn({512, 784}, 2));
            }),
            "linear: x [64, 783] does not match weight [512, 784] (in_features 784)");
  EXPECT_EQ(invalid_argument_message([] {
              ops::linear(randn({2, 4}, 1), randn({3, 4}, 2), randn({4}, 3));
            }),
            "linear: bias [4] does not match weight [3, 4] (out_features 3)");
  EXPECT_TRUE(contains(invalid_argument_message([] {
                         ops::linear(randn({2, 4}, 1), randn({4}, 2));
                       }),
                       "linear: weight must be 2-D [out_features, in_features], got [4]"));
}

}  // namespace
}  // namespace cohort
