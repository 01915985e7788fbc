#pragma once
// model.init_from: a model's starting weights from a safetensors file (fine-tuning weights
// exported from PyTorch, or a cohort checkpoint's model.safetensors), with model.init_map
// (renames) and model.init_skip (tensors left at their fresh initialisation, e.g. a classifier
// head for another number of classes). docs/models.md, "Pretrained weights".
#include <string>

#include "cohort/core/config.h"
#include "cohort/nn/module.h"

namespace cohort::train {

struct InitReport {
  std::string path;  // empty: model.init_from is unset and nothing was loaded
  int loaded = 0;    // model tensors set from the file
  int kept = 0;      // model tensors model.init_skip left at their initialisation
};

// Loads model.init_from into `model`, all or nothing. InvalidArgument (naming the file) when a
// model tensor is not in the file or the file has one the model lacks (after the renames and
// skips; with the names of both sides, up to a few each), when shapes differ (the tensor and
// both shapes), or when a tensor's dtype cannot become the model's (floats convert, f16/bf16/f64
// to f32); IoError when the file cannot be read or is not valid safetensors.
InitReport load_initial_weights(const Config& cfg, nn::Module& model);

}  // namespace cohort::train
