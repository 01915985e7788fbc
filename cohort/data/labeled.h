#pragma once
// What a labelled data set from a file (CSV, NumPy) says about itself, so that the trainer
// sizes its model from the data (input features or image shape, number of classes) instead of
// from constants. docs/data.md.
#include <cstdint>

#include "cohort/data/dataset.h"

namespace cohort::data {

class LabeledDataset : public Dataset {
 public:
  // The shape of one sample's x: {features} for flat rows, {C, H, W} for images.
  virtual const Shape& sample_shape() const = 0;
  // 1 + the largest label of this split (labels are 0 .. num_classes - 1).
  virtual int64_t num_classes() const = 0;
};

// x = (value - mean) / std for every feature; the identity by default.
struct Standardize {
  float mean = 0.0f;
  float std = 1.0f;
};

}  // namespace cohort::data
