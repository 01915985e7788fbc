// Gradient destinations (TensorImpl::grad_destination, autograd::AccumulateGrad::
// take_destination, Node::grad_buffer): linear's backward writes a leaf's fresh gradient
// straight into the leaf's armed destination (DDP's bucket slot, so nothing is copied later),
// handed out once per arming, and never when the leaf already has a gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cohort/ops/ops.h"

namespace cohort {
namespace {

using ops::add;
using ops::linear;
using ops::sum;

struct Layer {
  Tensor x = randn({4, 3}, 1);
  Tensor w = randn({5, 3}, 2).set_requires_grad(true);
  Tensor b = randn({5}, 3).set_requires_grad(true);
};

// Writes that must be overwritten: a kernel that skipped an element leaves a NaN.
Tensor armed_destination(Tensor& leaf) {
  Tensor d = full(leaf.shape(), std::numeric_limits<double>::quiet_NaN());
  leaf.impl().grad_destination = d.impl_ptr();
  leaf.impl().grad_destination_armed = true;
  return d;
}

TEST(GradDestination, LinearWritesTheFreshGradientIntoTheArmedDestination) {
  Layer l;
  sum(linear(l.x, l.w, l.b)).backward();
  const std::vector<float> dw = l.w.grad().to_vector<float>(), db = l.b.grad().to_vector<float>();
  l.w.set_grad(Tensor());
  l.b.set_grad(Tensor());
  Tensor w_dest = armed_destination(l.w), b_dest = armed_destination(l.b);
  sum(linear(l.x, l.w, l.b)).backward();
  EXPECT_EQ(l.w.grad().raw_data(), w_dest.raw_data());  // written in place: no copy
  EXPECT_EQ(l.b.grad().raw_data(), b_dest.raw_data());
  EXPECT_EQ(w_dest.to_vector<float>(), dw);
  EXPECT_EQ(b_dest.to_vector<float>(), db);
  EXPECT_FALSE(l.w.impl().grad_destination_armed);  // handed out once
  // Disarmed, or with a gradient already there: a tensor of its own, accumulated as before.
  sum(linear(l.x, l.w, l.b)).backward();
  EXPECT_EQ(l.w.grad().raw_data(), w_dest.raw_data());
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(w_dest.to_vector<float>()[i], 2 * dw[i]);
}

// A leaf used twice in one graph: the first use gets the destination, the second a tensor of
// its own, and the engine sums them: the gradient is right, whatever lands where.
TEST(GradDestination, ALeafUsedTwiceGetsTheSumOfBothUses) {
  Layer l;
  sum(linear(l.x, l.w, l.b)).backward();
  const std::vector<float> dw = l.w.grad().to_vector<float>();
  l.w.set_grad(Tensor());
  l.b.set_grad(Tensor());
  armed_destination(l.w);
  armed_destination(l.b);
  sum(add(linear(l.x, l.w, l.b), linear(l.x, l.w, l.b))).backward();
  const std::vector<float> got = l.w.grad().to_vector<float>();
  ASSERT_EQ(got.size(), dw.size());
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_FLOAT_EQ(got[i], 2 * dw[i]) << i;
}

}  // namespace
}  // namespace cohort
