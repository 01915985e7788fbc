#include "cohort/ops/ops.h"
#include "tests/support/gradcheck.h"

namespace cohort {
namespace {

using testing::gradcheck;

TEST(Views, ReshapeSharesStorageAndInfers) {
  Tensor x = arange(12);
  Tensor y = x.reshape({3, -1});
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.raw_data(), x.raw_data());
  EXPECT_THROW(x.reshape({5, -1}), InvalidArgument);
  EXPECT_THROW(x.reshape({-1, -1}), InvalidArgument);
}

TEST(Views, TransposeThenContiguousCopiesInLogicalOrder) {
  Tensor x = arange(6).reshape({2, 3});
  Tensor t = x.t();
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Views, SliceWithStep) {
  Tensor x = arange(10);
  EXPECT_EQ(x.slice(0, 1, 8, 3).to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_THROW(x.slice(0, 5, 2), InvalidArgument);
  EXPECT_THROW(x.slice(1, 0, 1), InvalidArgument);
}

TEST(Views, Gradients) {
  EXPECT_TRUE(gradcheck([](auto& in) { return in[0].reshape({6, 2}); }, {randn({3, 4}, 1)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return in[0].permute({2, 0, 1}); }, {randn({2, 3, 4}, 2)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return in[0].t().contiguous(); }, {randn({3, 5}, 3)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return in[0].slice(1, 1, 5, 2); }, {randn({3, 6}, 4)}));
  EXPECT_TRUE(gradcheck([](auto& in) { return in[0].t().reshape({-1}); }, {randn({3, 4}, 5)}));
}

TEST(Autograd, GradReadyHookFiresOnceWithFinalGradient) {
  Tensor w = randn({4}, 7).set_requires_grad(true);
  int calls = 0;
  std::vector<float> seen;
  w.register_grad_ready_hook([&](Tensor& p) {
    ++calls;
    seen = p.grad().to_vector<float>();
  });
  // w is used twice: the hook must fire after both contributions are summed.
  Tensor y = ops::concat({w.reshape({2, 2}), w.reshape({2, 2})}, 0);
  y.backward(ones({4, 2}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{2, 2, 2, 2}));
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor w = randn({4}, 7).set_requires_grad(true);
  autograd::NoGradGuard ng;
  Tensor y = w.reshape({2, 2});
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Autograd, BackwardOnNonScalarNeedsGrad) {
  Tensor w = randn({4}, 7).set_requires_grad(true);
  EXPECT_THROW(w.reshape({2, 2}).backward(), InvalidArgument);
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

// .grad may adopt the first gradient's buffer; a second backward must add into it without
// touching any other tensor.
TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = randn({3, 4}, 9).set_requires_grad(true);
  Tensor x = randn({2, 3}, 10);
  ops::sum(ops::matmul(x, w)).backward();
  std::vector<float> once = w.grad().to_vector<float>();
  Tensor first_grad = w.grad();
  ops::sum(ops::matmul(x, w)).backward();
  std::vector<float> twice = w.grad().to_vector<float>();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
  EXPECT_TRUE(first_grad.same(w.grad()));  // accumulated in place
  EXPECT_EQ(x.to_vector<float>(), randn({2, 3}, 10).to_vector<float>());
}

}  // namespace
}  // namespace cohort
