#pragma once
// One pass of a model over an evaluation split: mean cross-entropy and, for classification,
// accuracy. Shared by the trainer (through its strategy's eval_forward) and the federated
// server (the global model on the test split).
#include <functional>

#include "cohort/data/dataset.h"
#include "cohort/tensor/tensor.h"
#include "cohort/train/trainer.h"

namespace cohort::train {

struct EvalOptions {
  int64_t batch = 500;
  int64_t max_batches = 0;  // 0: the whole split
  bool is_text = false;     // no accuracy for language models
};

// forward: inputs -> logits. Runs without gradients.
EvalResult evaluate_split(const std::function<Tensor(const Tensor&)>& forward,
                          std::shared_ptr<const data::Dataset> split, const EvalOptions& options);

}  // namespace cohort::train
