#pragma once
// The layers a sequential model (nn/models/sequential.h, `model.type = "sequential"`) may hold
// beyond layers.h: batch norm, average pooling, tanh and sigmoid, residual blocks and learned
// position embeddings. Each behaves as its torch.nn namesake, so a torch.nn.Sequential built
// from the same list has the same parameter names and shapes (model.init_from loads it).
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/nn/layers.h"

namespace cohort::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch statistic
};
// torch.nn.BatchNorm1d / BatchNorm2d: normalises each channel (dim 1) of x [N, C] or
// [N, C, H, W] with the batch's mean and biased variance in training mode, and with the running
// statistics in evaluation mode. weight [C] = 1, bias [C] = 0; buffers running_mean [C] = 0,
// running_var [C] = 1 (updated with the unbiased variance, as PyTorch does) and
// num_batches_tracked. In data-parallel training each worker normalises with its own batch's
// statistics (PyTorch's BatchNorm under DDP, not SyncBatchNorm).
class BatchNorm : public Module {
 public:
  explicit BatchNorm(int64_t channels, BatchNormOptions opt = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm"; }

 private:
  void update_running(const Tensor& mean, const Tensor& var, int64_t per_channel);
  int64_t channels_;
  BatchNormOptions opt_;
  Tensor weight_, bias_, running_mean_, running_var_, tracked_;
};

// torch.nn.AvgPool2d(kernel) (stride = kernel, no padding): x [N, C, H, W] ->
// [N, C, H / k, W / k], rows and columns past the last whole window dropped (floor mode).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }

 private:
  int64_t kernel_;
};

// torch.nn.AdaptiveAvgPool2d(1): x [N, C, H, W] -> [N, C, 1, 1], the mean of each channel.
class GlobalAvgPool2d : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GlobalAvgPool2d"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sigmoid"; }
};

// x + body(x): its children run in order as a Sequential's do (named "0", "1", ...), and their
// output must have the input's shape.
class Residual : public Sequential {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Residual"; }
};

// x [B, T, D] + weight[0..T): a learned position embedding (weight [max_len, D] ~ N(0, 0.02),
// as GPT-2's wpe). T must be at most max_len.
class PositionEmbedding : public Module {
 public:
  PositionEmbedding(int64_t max_len, int64_t dim);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "PositionEmbedding"; }

 private:
  int64_t max_len_, dim_;
  Tensor weight_;
};

}  // namespace cohort::nn
