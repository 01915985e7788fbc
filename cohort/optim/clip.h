#pragma once
// Gradient clipping by global L2 norm, as torch.nn.utils.clip_grad_norm_:
//   total = sqrt(sum over params of sum(grad^2))
//   grads *= min(1, max_norm / (total + 1e-6))
// Parameters without a gradient are skipped. Returns `total` (before clipping). A non-finite
// total propagates into the gradients, as PyTorch's default (error_if_nonfinite=False) does.
// The sum runs in double in a fixed order: the result does not depend on the thread count.
#include <vector>

#include "cohort/optim/optimizer.h"

namespace cohort::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
double clip_grad_norm(const NamedParams& params, double max_norm);
// The global L2 norm alone, without scaling.
double grad_norm(const std::vector<Tensor>& params);
// Multiplies every defined tensor (contiguous float32) by coef: the scaling step of clipping,
// for callers that compute the norm themselves (ZeRO: over every rank's shard).
void scale_tensors(const std::vector<Tensor>& tensors, double coef);

}  // namespace cohort::optim
