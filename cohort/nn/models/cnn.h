#pragma once
// The small MNIST/Fashion-MNIST CNN (same layers as the PyTorch baseline in bench/):
//   x [N, 1, 28, 28]
//   conv1 1->32 3x3 (no padding) -> [N, 32, 26, 26], ReLU, maxpool 2 -> [N, 32, 13, 13]
//   conv2 32->64 3x3             -> [N, 64, 11, 11], ReLU, maxpool 2 -> [N, 64, 5, 5]
//   flatten -> [N, 1600], fc1 1600->128, ReLU, fc2 128->10 -> logits [N, 10]
// 225,034 parameters: conv1 320, conv2 18,496, fc1 204,928, fc2 1,290.
// Other image sizes and class counts (CnnOptions; cohort train takes them from the data): the
// same layers, conv1 taking `channels` inputs, fc1 the flattened [64, h, w] after the second
// pool, fc2 `classes` outputs. Images must be at least 10x10.
#include <cstdint>
#include <memory>

#include "cohort/nn/layers.h"

namespace cohort::nn {

struct CnnOptions {
  uint64_t seed = 0;
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t classes = 10;
};

class CNN : public Module {
 public:
  explicit CNN(CnnOptions opt = {});
  // x [N, channels, height, width] or [N, channels * height * width] -> logits [N, classes].
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CNN"; }

 private:
  CnnOptions opt_;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<Linear> fc1_, fc2_;
};

}  // namespace cohort::nn
