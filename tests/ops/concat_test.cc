#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

TEST(Concat, ValuesAlongEachDim) {
  Tensor a = arange(6).reshape({2, 3}), b = ops::add_scalar(arange(4), 10).reshape({2, 2});
  Tensor c = ops::concat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 1, 2, 10, 11, 3, 4, 5, 12, 13}));
  Tensor d = ops::concat({a, a.slice(0, 1, 2)}, 0);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Strided inputs (transposed, sliced) and negative dims.
  Tensor e = ops::concat({a.t(), b}, -2);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5, 10, 11, 12, 13}));
  // Integer tensors concatenate too.
  Tensor i = ops::concat({from_vector_i64({1, 2}, {2}), from_vector_i64({3}, {1})}, 0);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  // A zero-size part is allowed.
  EXPECT_EQ(ops::concat({a, zeros({2, 0})}, 1).to_vector<float>(), a.to_vector<float>());
}

TEST(Concat, Errors) {
  Tensor a = randn({2, 3}, 1);
  EXPECT_THROW(ops::concat({}, 0), InvalidArgument);
  EXPECT_THROW(ops::concat({a, a}, 2), InvalidArgument);
  EXPECT_THROW(ops::concat({a, randn({3}, 2)}, 0), InvalidArgument);
  EXPECT_THROW(ops::concat({a, from_vector_i64({1, 2, 3}, {1, 3})}, 0), InvalidArgument);
  try {
    ops::concat({a, randn({2, 4}, 3)}, 0);
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[2, 4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  }
}

TEST(Concat, Gradients) {
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        return ops::concat({in[0], in[1], in[2]}, 1);
      },
      {randn({2, 3}, 1), randn({2, 1}, 2), randn({2, 2}, 3)}));
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        return ops::concat({in[0].t(), in[1]}, 0);
      },
      {randn({3, 2}, 4), randn({1, 3}, 5)}));
  // Only some inputs need a gradient.
  Tensor w = randn({2, 2}, 6).set_requires_grad(true);
  Tensor y = ops::concat({randn({1, 2}, 7), w}, 0);
  ops::sum(ops::mul(y, y)).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), ops::mul_scalar(w, 2).to_vector<float>());
}

TEST(Split, ReturnsViewsOfTheInput) {
  Tensor x = arange(12).reshape({3, 4});
  std::vector<Tensor> parts = ops::split(x, {1, 3}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(parts[1].shape(), (Shape{3, 3}));
  EXPECT_EQ(parts[0].to_vector<float>(), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  EXPECT_EQ(parts[1].raw_data(), static_cast<float*>(x.raw_data()) + 1);  // a view
  std::vector<Tensor> rows = ops::split(x, {2, 0, 1}, 0);
  EXPECT_EQ(rows[1].numel(), 0);
  EXPECT_EQ(ops::concat(rows, 0).to_vector<float>(), x.to_vector<float>());
}

TEST(Split, Errors) {
  Tensor x = randn({3, 5}, 1);
  try {
    ops::split(x, {2, 2}, 1);
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[3, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 2]"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::split(x, {4, -1}, 0), InvalidArgument);
  EXPECT_THROW(ops::split(x, {3}, 2), InvalidArgument);
}

TEST(Split, GradientsWithUnusedOutputs) {
  // All outputs used.
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        auto p = ops::split(in[0], {1, 2, 1}, 1);
        return ops::concat({ops::mul_scalar(p[2], 3), p[0], ops::exp(p[1])}, 1);
      },
      {randn({2, 4}, 1)}));
  // The middle output unused: its gradient is undefined and its slice gets zeros.
  EXPECT_TRUE(gradcheck(
      [](auto& in) {
        auto p = ops::split(in[0], {1, 2, 1}, 0);
        return ops::mul(p[0], p[2]);
      },
      {randn({4, 3}, 2)}));
  Tensor x = randn({4, 3}, 3).set_requires_grad(true);
  auto p = ops::split(x, {3, 1}, 0);
  ops::sum(p[1]).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
}

}  // namespace
}  // namespace cohort
