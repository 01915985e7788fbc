#include "cohort/nn/models/mlp.h"

#include "cohort/ops/ops.h"

namespace cohort::nn {

MLP::MLP(std::vector<int64_t> sizes, MlpOptions opt) : sizes_(std::move(sizes)) {
  COHORT_CHECK_ARG(sizes_.size() >= 2, "MLP: need at least input and output sizes, got ",
                   shape_str(sizes_));
  auto layers = register_module("layers", std::make_shared<Sequential>());
  for (size_t i = 0; i + 1 < sizes_.size(); ++i) {
    linears_.push_back(std::make_shared<Linear>(sizes_[i], sizes_[i + 1]));
    layers->push_back(linears_.back());
  }
  reset_parameters(opt.seed);
}

Tensor MLP::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() >= 2, "MLP: input ", shape_str(x.shape()), " must be [N, ", sizes_[0],
                   "] or [N, ...]");
  Tensor h = x.dim() == 2 ? x : x.flatten(1);
  COHORT_CHECK_ARG(h.size(1) == sizes_[0], "MLP: input ", shape_str(x.shape()), " has ", h.size(1),
                   " features per sample, expected ", sizes_[0]);
  for (size_t i = 0; i < linears_.size(); ++i) {
    h = (*linears_[i])(h);
    if (i + 1 < linears_.size()) h = ops::relu(h);
  }
  return h;
}

}  // namespace cohort::nn
