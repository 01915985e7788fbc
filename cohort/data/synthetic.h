#pragma once
// A deterministic classification dataset for tests and benchmarks: Gaussian clusters.
//
// Class c has a centre m_c ~ N(0, separation^2 I); sample i has a label y_i drawn uniformly
// from the classes and features x_i = m_{y_i} + noise * N(0, I). Every number comes from
// Philox keyed by seeds derived from `seed`, so the data is the same on every platform and
// rank. The samples are generated once, in the constructor, so that get_batch is a memcpy.
#include <memory>
#include <vector>

#include "cohort/data/dataset.h"

namespace cohort::data {

struct SyntheticOptions {
  int64_t num_samples = 1024;
  Shape shape = {16};  // per-sample feature shape: {784} for an MLP, {1, 28, 28} for a CNN
  int64_t num_classes = 4;
  uint64_t seed = 0;
  float separation = 1.0f;  // std of the class centres
  float noise = 1.0f;       // std of the noise around them
};

class Synthetic final : public Dataset {
 public:
  explicit Synthetic(const SyntheticOptions& options);

  int64_t size() const override { return num_samples_; }
  // x float32 [B, shape...], y int64 [B].
  Batch get_batch(std::span<const int64_t> indices) const override;

  int64_t num_classes() const { return num_classes_; }
  int64_t features() const { return features_; }  // product of shape

 private:
  struct Data {
    std::vector<float> x;  // [num_samples, features]
    std::vector<int64_t> y;
  };
  std::shared_ptr<const Data> data_;  // shared by copies: datasets are handed around by value
  Shape shape_;
  int64_t num_samples_;
  int64_t features_;
  int64_t num_classes_;
};

}  // namespace cohort::data
