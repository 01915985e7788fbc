#include <cmath>

#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

// Reference softmax of each row of a contiguous [rows, cols] vector, in double.
std::vector<double> ref_softmax(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<double> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(v[size_t(r * cols + c)]));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(v[size_t(r * cols + c)]) - m);
    for (int64_t c = 0; c < cols; ++c)
      out[size_t(r * cols + c)] = std::exp(double(v[size_t(r * cols + c)]) - m) / s;
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                  double rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "at " << i;
}

TEST(Softmax, MatchesReferenceOnRows) {
  for (int64_t cols : {1, 3, 8, 13, 1000}) {
    SCOPED_TRACE(cols);
    Tensor x = ops::mul_scalar(randn({5, cols}, uint64_t(cols)), 3);
    std::vector<double> ref = ref_softmax(x.to_vector<float>(), 5, cols);
    expect_close(ops::softmax(x, -1).to_vector<float>(), ref, 1e-7, 1e-6);
    std::vector<double> log_ref(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) log_ref[i] = std::log(ref[i]);
    expect_close(ops::log_softmax(x, 1).to_vector<float>(), log_ref, 1e-5, 1e-6);
  }
}

TEST(Softmax, StableForLargeLogits) {
  Tensor x = from_vector({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  std::vector<double> ref = ref_softmax(x.to_vector<float>(), 2, 3);
  expect_close(ops::softmax(x, 1).to_vector<float>(), ref, 1e-7, 1e-6);
  std::vector<float> ls = ops::log_softmax(x, 1).to_vector<float>();
  for (size_t i = 0; i < ls.size(); ++i) EXPECT_NEAR(ls[i], std::log(ref[i]), 1e-5);
  // The fused loss keeps that precision too: -log softmax([1000, 1001, 1002])[0].
  EXPECT_NEAR(ops::cross_entropy(x, from_vector_i64({0, 0}, {2})).item<float>(),
              -(std::log(ref[0]) + std::log(ref[3])) / 2, 1e-6);
  // A row with -inf entries: those get probability 0.
  Tensor m = from_vector({0, -INFINITY, 0}, {1, 3});
  EXPECT_EQ(ops::softmax(m, 1).to_vector<float>(), (std::vector<float>{0.5f, 0, 0.5f}));
}

TEST(Softmax, OverANonLastDimAndStridedInput) {
  Tensor x = randn({4, 3, 2}, 3);
  // softmax over dim 1 == permute that dim last, softmax, permute back.
  Tensor want = ops::softmax(x.permute({0, 2, 1}).contiguous(), -1).permute({0, 2, 1});
  EXPECT_EQ(ops::softmax(x, 1).to_vector<float>(), want.contiguous().to_vector<float>());
  EXPECT_EQ(ops::softmax(x, 1).shape(), (Shape{4, 3, 2}));
  Tensor xt = randn({6, 5}, 4).t();
  EXPECT_EQ(ops::log_softmax(xt, 1).to_vector<float>(),
            ops::log_softmax(xt.contiguous(), 1).to_vector<float>());
  EXPECT_THROW(ops::softmax(x, 3), InvalidArgument);
  EXPECT_THROW(ops::log_softmax(from_vector_i64({1}, {1}), 0), InvalidArgument);
}

TEST(Softmax, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::softmax(in[0], -1); }, {randn({3, 5}, 1)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::softmax(in[0], 0); }, {randn({3, 5}, 2)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::log_softmax(in[0], 1); }, {randn({4, 9}, 3)}));
  EXPECT_TRUE(
      gradcheck([](auto& in) { return ops::log_softmax(in[0], 1); }, {randn({2, 3, 4}, 4)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::softmax(in[0].t(), 1); }, {randn({5, 3}, 5)}));
}

// -mean over rows of log_softmax(logits)[row, target], composed from other ops.
double ref_cross_entropy(const Tensor& logits, const std::vector<int64_t>& t) {
  std::vector<float> ls = ops::log_softmax(logits, 1).to_vector<float>();
  const int64_t c = logits.size(1);
  double s = 0;
  for (size_t i = 0; i < t.size(); ++i) s -= ls[i * size_t(c) + size_t(t[i])];
  return s / double(t.size());
}

TEST(CrossEntropy, EqualsMeanNegativeLogSoftmaxOfTargets) {
  Tensor logits = ops::mul_scalar(randn({6, 10}, 1), 4);
  std::vector<int64_t> t = {0, 9, 3, 3, 7, 1};
  Tensor loss = ops::cross_entropy(logits, from_vector_i64(t, {6}));
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(loss.item<float>(), ref_cross_entropy(logits, t), 1e-5);
  // Many classes (vectorised rows, tails) and a strided view of the logits.
  Tensor big = randn({1001, 40}, 2).t();  // [40, 1001], not contiguous
  std::vector<int64_t> tb(40);
  for (size_t i = 0; i < tb.size(); ++i) tb[i] = int64_t(i * 37 % 1001);
  EXPECT_NEAR(ops::cross_entropy(big, from_vector_i64(tb, {40})).item<float>(),
              ref_cross_entropy(big, tb), 1e-5);
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHotOverN) {
  Tensor logits = randn({3, 4}, 5).set_requires_grad(true);
  std::vector<int64_t> t = {2, 0, 3};
  ops::cross_entropy(logits, from_vector_i64(t, {3})).backward();
  std::vector<double> p = ref_softmax(logits.to_vector<float>(), 3, 4);
  for (size_t i = 0; i < 3; ++i) p[i * 4 + size_t(t[i])] -= 1;
  for (double& v : p) v /= 3;
  expect_close(logits.grad().to_vector<float>(), p, 1e-7, 1e-5);
  Tensor targets = from_vector_i64({1, 0, 2, 2}, {4});
  EXPECT_TRUE(
      gradcheck([&](auto& in) { return ops::cross_entropy(in[0], targets); }, {randn({4, 3}, 6)}));
  // Scaled upstream gradient: d(2 * loss) = 2 * d(loss).
  EXPECT_TRUE(gradcheck(
      [&](auto& in) { return ops::mul_scalar(ops::cross_entropy(in[0].t(), targets), 2); },
      {randn({3, 4}, 7)}));
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(CrossEntropy, BadTargetsAreClearErrors) {
  Tensor logits = randn({4, 10}, 1);
  expect_error([&] { ops::cross_entropy(logits, zeros({4})); }, {"int64", "float32"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, from_vector_i64({1, 2, 3}, {3}));
      },
      {"[3]", "[4, 10]"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, from_vector_i64({1, 2, 3, 4}, {4, 1}));
      },
      {"[4, 1]"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, from_vector_i64({1, 10, 3, 4}, {4}));
      },
      {"10", "position 1", "10 classes"});
  expect_error(
      [&] {
        ops::cross_entropy(logits, from_vector_i64({1, 2, -1, 4}, {4}));
      },
      {"-1", "position 2"});
  expect_error(
      [&] {
        ops::cross_entropy(randn({2, 3, 4}, 2), from_vector_i64({0, 1}, {2}));
      },
      {"[N, C]", "[2, 3, 4]"});
}

}  // namespace
}  // namespace cohort
