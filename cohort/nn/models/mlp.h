#pragma once
// Multi-layer perceptron: Linear layers with ReLU between them (none after the last).
// MLP({784, 512, 256, 10}) has 535,818 parameters named layers.{0,1,2}.{weight,bias}.
#include <cstdint>
#include <memory>
#include <vector>

#include "cohort/nn/layers.h"

namespace cohort::nn {

struct MlpOptions {
  uint64_t seed = 0;  // parameters derive from (seed, name): see Module::reset_parameters
};

class MLP : public Module {
 public:
  // sizes: input features, hidden sizes..., outputs (at least two entries).
  explicit MLP(std::vector<int64_t> sizes, MlpOptions opt = {});
  // x [N, in] or [N, ...] flattening to [N, in] (images [N, 1, 28, 28]) -> [N, out].
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MLP"; }
  const std::vector<int64_t>& sizes() const { return sizes_; }

 private:
  std::vector<int64_t> sizes_;
  std::vector<std::shared_ptr<Linear>> linears_;
};

}  // namespace cohort::nn
