// The caching allocator's promise, on a real training step: after the first steps, a step of
// forward, backward and optimizer update takes no memory from the system.
#include <gtest/gtest.h>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/tensor/allocator.h"

namespace cohort {
namespace {

uint64_t system_allocs_during_steps(nn::Module& model, const Tensor& x, const Tensor& y, int warmup,
                                    int steps) {
  optim::SGD opt(model.named_parameters(), {.lr = 0.01, .momentum = 0.9});
  auto step = [&] {
    Tensor loss = nn::cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < warmup; ++i) step();
  uint64_t before = CpuAllocator::instance().stats().system_allocs;
  for (int i = 0; i < steps; ++i) step();
  return CpuAllocator::instance().stats().system_allocs - before;
}

TEST(SteadyState, MlpStepAllocatesNothingAfterWarmup) {
  nn::MLP model({784, 64, 10});
  Tensor x = randn({32, 784}, 1);
  Tensor y = zeros({32}, DType::i64);
  EXPECT_EQ(system_allocs_during_steps(model, x, y, 2, 10), 0u);
}

TEST(SteadyState, CnnStepAllocatesNothingAfterWarmup) {
  nn::CNN model;
  Tensor x = randn({4, 1, 28, 28}, 2);
  Tensor y = zeros({4}, DType::i64);
  EXPECT_EQ(system_allocs_during_steps(model, x, y, 2, 5), 0u);
}

}  // namespace
}  // namespace cohort
