#include <cmath>
#include <functional>
#include <limits>

#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

// Every element of op(x) against ref computed in double, within atol + rtol * |ref|.
void expect_matches(const Tensor& got, const Tensor& x, const std::function<double(double)>& ref,
                    double atol, double rtol) {
  std::vector<float> g = got.to_vector<float>(), xv = x.to_vector<float>();
  ASSERT_EQ(g.size(), xv.size());
  ASSERT_EQ(got.shape(), x.shape());
  for (size_t i = 0; i < g.size(); ++i) {
    double want = ref(double(xv[i]));
    ASSERT_NEAR(g[i], want, atol + rtol * std::abs(want)) << "at x = " << xv[i];
  }
}

double gelu_ref(double x) {
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}

// Values spread over [-lo, hi], including the ranges the vectorised exp/erf handle piecewise.
Tensor spread(double lo, double hi, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(lo + (hi - lo) * double(i) / double(n - 1));
  return from_vector(v, {n});
}

TEST(Unary, ActivationsMatchLibm) {
  Tensor x = spread(-12, 12, 4001);
  expect_matches(
      ops::relu(x), x, [](double v) { return v > 0 ? v : 0; }, 0, 0);
  // Exact GELU (erf form, as torch.nn.GELU()), also in the far negative tail.
  expect_matches(ops::gelu(x), x, gelu_ref, 1e-7, 2e-5);
  expect_matches(
      ops::tanh(x), x, [](double v) { return std::tanh(v); }, 1e-7, 1e-6);
  expect_matches(
      ops::sigmoid(x), x, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-9, 1e-6);
  Tensor e = spread(-100, 88, 5001);
  expect_matches(
      ops::exp(e), e, [](double v) { return std::exp(v); }, 1e-44, 3e-7);
  Tensor p = spread(1e-3, 50, 2001);
  expect_matches(
      ops::log(p), p, [](double v) { return std::log(v); }, 1e-6, 1e-6);
  expect_matches(
      ops::sqrt(p), p, [](double v) { return std::sqrt(v); }, 0, 1e-7);
  expect_matches(
      ops::pow_scalar(p, 2), p, [](double v) { return v * v; }, 0, 1e-7);
  expect_matches(
      ops::pow_scalar(p, 1.5), p, [](double v) { return std::pow(v, 1.5); }, 0, 1e-6);
  expect_matches(
      ops::pow_scalar(p, -1), p, [](double v) { return 1 / v; }, 0, 1e-6);
}

TEST(Unary, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = from_vector({inf, -inf, NAN, 100.f, -200.f, 0.f}, {6});
  std::vector<float> e = ops::exp(x).to_vector<float>();
  EXPECT_EQ(e[0], inf);
  EXPECT_EQ(e[1], 0.f);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], inf);
  EXPECT_EQ(e[4], 0.f);
  EXPECT_EQ(e[5], 1.f);
  std::vector<float> s = ops::sigmoid(x).to_vector<float>();
  EXPECT_EQ(s[0], 1.f);
  EXPECT_EQ(s[1], 0.f);
  EXPECT_TRUE(std::isnan(s[2]));
  std::vector<float> t = ops::tanh(x).to_vector<float>();
  EXPECT_EQ(t[0], 1.f);
  EXPECT_EQ(t[1], -1.f);
  EXPECT_TRUE(std::isnan(t[2]));
  EXPECT_EQ(t[4], -1.f);
  EXPECT_EQ(t[5], 0.f);
  std::vector<float> g = ops::gelu(x).to_vector<float>();
  EXPECT_EQ(g[0], inf);
  EXPECT_TRUE(std::isnan(g[2]));
  EXPECT_EQ(g[3], 100.f);
  EXPECT_EQ(g[4], -0.f);
  EXPECT_TRUE(std::isnan(ops::relu(x).to_vector<float>()[2]));
}

TEST(Unary, ScalarOps) {
  Tensor x = from_vector({-1, 0, 2.5f}, {3});
  EXPECT_EQ(ops::add_scalar(x, 2).to_vector<float>(), (std::vector<float>{1, 2, 4.5f}));
  EXPECT_EQ(ops::mul_scalar(x, -2).to_vector<float>(), (std::vector<float>{2, 0, -5}));
  EXPECT_EQ(ops::neg(x).to_vector<float>(), (std::vector<float>{1, 0, -2.5f}));
  EXPECT_THROW(ops::relu(from_vector_i64({1, 2}, {2})), InvalidArgument);
  EXPECT_THROW(ops::exp(Tensor()), InvalidArgument);
}

TEST(Unary, LargeTensorsSplitAcrossThreadsGiveTheSameValues) {
  Tensor x = randn({100000}, 5);
  std::vector<float> all = ops::gelu(x).to_vector<float>();
  std::vector<float> tail = ops::gelu(x.slice(0, 99990, 100000)).to_vector<float>();
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(tail[i], all[99990 + i]);
}

// Inputs kept away from the kinks and poles of the ops under test.
Tensor away_from_zero(const Shape& s, uint64_t seed) {
  Tensor x = randn(s, seed);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::abs(p[i]) < 0.1f) p[i] = p[i] < 0 ? -0.3f : 0.3f;
  return x;
}

TEST(Unary, Gradients) {
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> ops_any = {
      {"relu", [](const Tensor& t) { return ops::relu(t); }},
      {"gelu", [](const Tensor& t) { return ops::gelu(t); }},
      {"tanh", [](const Tensor& t) { return ops::tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return ops::sigmoid(t); }},
      {"exp", [](const Tensor& t) { return ops::exp(t); }},
      {"neg", [](const Tensor& t) { return ops::neg(t); }},
      {"add_scalar", [](const Tensor& t) { return ops::add_scalar(t, 3); }},
      {"mul_scalar", [](const Tensor& t) { return ops::mul_scalar(t, -1.5); }},
      {"pow2", [](const Tensor& t) { return ops::pow_scalar(t, 2); }},
      {"pow3", [](const Tensor& t) { return ops::pow_scalar(t, 3); }}};
  for (const auto& [name, fn] : ops_any) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradcheck([&](auto& in) { return fn(in[0]); }, {away_from_zero({3, 4}, 7)}));
    // Through a transposed (non-contiguous) view.
    EXPECT_TRUE(gradcheck([&](auto& in) { return fn(in[0].t()); }, {away_from_zero({4, 3}, 8)}));
  }
  const std::vector<std::pair<const char*, Fn>> ops_positive = {
      {"log", [](const Tensor& t) { return ops::log(t); }},
      {"sqrt", [](const Tensor& t) { return ops::sqrt(t); }},
      {"pow1.5", [](const Tensor& t) { return ops::pow_scalar(t, 1.5); }},
      {"pow-0.5", [](const Tensor& t) { return ops::pow_scalar(t, -0.5); }}};
  for (const auto& [name, fn] : ops_positive) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradcheck([&](auto& in) { return fn(in[0]); }, {uniform({3, 4}, 0.5, 3, 9)}));
  }
  // GELU's derivative in the tails and around 0 (no kink there).
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::gelu(in[0]); },
                        {from_vector({-6, -3, -1, -0.01f, 0, 0.01f, 1, 3, 6}, {9})}));
}

}  // namespace
}  // namespace cohort
