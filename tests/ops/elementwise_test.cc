#include <cmath>
#include <functional>

#include "cohort/core/thread_pool.h"
#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

// Reference broadcasting by plain index math: out[k] = f(a[k mapped], b[k mapped]).
std::vector<float> ref_binary(const Tensor& a, const Tensor& b, const Shape& out,
                              const std::function<float(float, float)>& f) {
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  // Offset into a contiguous tensor of shape s for the output coordinates `coord`.
  auto offset = [&](const Shape& s, const Shape& coord) {
    Shape st = contiguous_strides(s);
    const size_t lead = out.size() - s.size();
    int64_t off = 0;
    for (size_t j = 0; j < s.size(); ++j) off += s[j] == 1 ? 0 : coord[lead + j] * st[j];
    return off;
  };
  std::vector<float> r(size_t(shape_numel(out)));
  Shape coord(out.size(), 0);
  for (size_t k = 0; k < r.size(); ++k) {
    int64_t rem = int64_t(k);
    for (size_t i = out.size(); i-- > 0;) {
      coord[i] = rem % out[i];
      rem /= out[i];
    }
    r[k] = f(av[size_t(offset(a.shape(), coord))], bv[size_t(offset(b.shape(), coord))]);
  }
  return r;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "at element " << i;
}

TEST(Elementwise, BroadcastShapes) {
  EXPECT_EQ(ops::broadcast_shapes({2, 1, 4}, {3, 1}, "mul"), (Shape{2, 3, 4}));
  EXPECT_EQ(ops::broadcast_shapes({}, {2, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(ops::broadcast_shapes({5, 1}, {1}, "add"), (Shape{5, 1}));
  EXPECT_EQ(ops::broadcast_shapes({0, 3}, {1, 3}, "add"), (Shape{0, 3}));
}

TEST(Elementwise, IncompatibleShapesNameBothShapesAndTheOp) {
  try {
    ops::add(randn({2, 3}, 1), randn({4}, 2));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::mul(randn({2, 3, 4}, 1), randn({3, 3}, 2)), InvalidArgument);
  EXPECT_THROW(ops::add(randn({2}, 1), from_vector_i64({1, 2}, {2})), InvalidArgument);
}

struct BinaryCase {
  Shape a, b;
};

TEST(Elementwise, BinaryOpsMatchReferenceUnderBroadcasting) {
  const std::vector<BinaryCase> cases = {
      {{2, 3}, {2, 3}},    {{2, 3}, {3}},      {{3}, {2, 3}},       {{4, 3}, {4, 1}},
      {{2, 1, 4}, {3, 1}}, {{}, {2, 3}},       {{2, 3}, {}},        {{1, 5}, {3, 1}},
      {{300, 200}, {200}}, {{70000}, {70000}}, {{2, 40000}, {2, 1}}};
  for (const auto& c : cases) {
    Tensor a = randn(c.a, 1), b = uniform(c.b, 0.5, 2.0, 2);
    Shape out = ops::broadcast_shapes(c.a, c.b, "test");
    SCOPED_TRACE(shape_str(c.a) + " op " + shape_str(c.b));
    expect_near(ops::add(a, b).to_vector<float>(),
                ref_binary(a, b, out, [](float x, float y) { return x + y; }), 0);
    expect_near(ops::sub(a, b).to_vector<float>(),
                ref_binary(a, b, out, [](float x, float y) { return x - y; }), 0);
    expect_near(ops::mul(a, b).to_vector<float>(),
                ref_binary(a, b, out, [](float x, float y) { return x * y; }), 0);
    expect_near(ops::div(a, b).to_vector<float>(),
                ref_binary(a, b, out, [](float x, float y) { return x / y; }), 1e-7);
    EXPECT_EQ(ops::add(a, b).shape(), out);
  }
}

TEST(Elementwise, NonContiguousInputs) {
  Tensor a = randn({4, 3}, 1), b = randn({3, 4}, 2);
  Tensor at = a.t(), sl = randn({3, 8}, 3).slice(1, 0, 8, 2);  // [3, 4] strided views
  Tensor want = ops::add(at.contiguous(), b);
  EXPECT_EQ(ops::add(at, b).to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(ops::mul(at, sl).to_vector<float>(),
            ops::mul(at.contiguous(), sl.contiguous()).to_vector<float>());
  // A transposed input broadcast against a row.
  Tensor row = randn({4}, 4);
  EXPECT_EQ(ops::sub(at, row).to_vector<float>(),
            ops::sub(at.contiguous(), row).to_vector<float>());
  EXPECT_EQ(ops::relu(at).to_vector<float>(), ops::relu(at.contiguous()).to_vector<float>());
  EXPECT_EQ(ops::relu(at).shape(), (Shape{3, 4}));
}

TEST(Elementwise, LargeBinaryIsSameWithOneOrManyThreads) {
  Tensor a = randn({600, 300}, 1), b = randn({300}, 2);
  set_num_threads(1);
  std::vector<float> one = ops::mul(a, b).to_vector<float>();
  set_num_threads(4);
  std::vector<float> many = ops::mul(a, b).to_vector<float>();
  set_num_threads(0);
  EXPECT_EQ(one, many);
}

TEST(Elementwise, BinaryGradients) {
  const std::vector<BinaryCase> cases = {{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 4}, {3, 1}},
                                         {{}, {2, 3}},     {{2, 3}, {}},  {{2, 3}, {2, 1}},
                                         {{3}, {2, 3}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(shape_str(c.a) + " op " + shape_str(c.b));
    // Fresh leaves for every check: gradients accumulate into .grad.
    auto inputs = [&] { return std::vector<Tensor>{randn(c.a, 11), uniform(c.b, 0.5, 2.0, 12)}; };
    EXPECT_TRUE(gradcheck([](auto& in) { return ops::add(in[0], in[1]); }, inputs()));
    EXPECT_TRUE(gradcheck([](auto& in) { return ops::sub(in[0], in[1]); }, inputs()));
    EXPECT_TRUE(gradcheck([](auto& in) { return ops::mul(in[0], in[1]); }, inputs()));
    EXPECT_TRUE(gradcheck([](auto& in) { return ops::div(in[0], in[1]); }, inputs()));
  }
}

TEST(Elementwise, GradientsThroughNonContiguousAndSharedInputs) {
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::mul(in[0].t(), in[1]); },
                        {randn({4, 3}, 1), randn({3, 4}, 2)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return ops::div(in[1], in[0].t()); },
                        {uniform({4, 3}, 0.5, 2, 1), randn({4}, 2)}));
  // x * x: both gradient contributions reach the same leaf.
  Tensor x = randn({5}, 3).set_requires_grad(true);
  ops::sum(ops::mul(x, x)).backward();
  expect_near(x.grad().to_vector<float>(), ops::mul_scalar(x, 2.0).to_vector<float>(), 1e-6);
}

TEST(Elementwise, OnlyTheInputThatNeedsGradGetsOne) {
  Tensor a = randn({2, 3}, 1).set_requires_grad(true), b = randn({3}, 2);
  ops::sum(ops::mul(a, b)).backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  std::vector<float> ga = a.grad().to_vector<float>(), bv = b.to_vector<float>();
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(ga[size_t(i)], bv[size_t(i % 3)]);
}

TEST(Elementwise, Operators) {
  Tensor a = from_vector({1, 2, 3}, {3}), b = from_vector({4, 5, 6}, {3});
  EXPECT_EQ(((a + b) * 2.0 - a / b).to_vector<float>(),
            (std::vector<float>{10 - 0.25f, 14 - 0.4f, 18 - 0.5f}));
  EXPECT_EQ((-a + 1.0).to_vector<float>(), (std::vector<float>{0, -1, -2}));
  EXPECT_EQ((3.0 * a / 2.0).to_vector<float>(), (std::vector<float>{1.5f, 3, 4.5f}));
}

}  // namespace
}  // namespace cohort
