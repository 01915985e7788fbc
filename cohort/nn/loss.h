#pragma once
// Losses, as torch.nn.functional: thin forwards to the fused ops.
#include "cohort/ops/ops.h"

namespace cohort::nn {

// logits [N, C] and targets int64 [N] -> mean cross entropy (scalar).
// Also takes logits [..., C] with targets [...] (a language model's [B, T, V] and [B, T]),
// flattened to [N, C] and [N] first.
inline Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  if (logits.dim() <= 2) return ops::cross_entropy(logits, targets);
  Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  COHORT_CHECK_ARG(targets.shape() == lead, "cross_entropy: logits ", shape_str(logits.shape()),
                   " need targets ", shape_str(lead), ", got ", shape_str(targets.shape()));
  return ops::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

}  // namespace cohort::nn
