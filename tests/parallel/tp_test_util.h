#pragma once
// Helpers for tensor-parallel tests: comparisons of tensors and cutting the unsharded
// reference into a rank's piece.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cohort/nn/shard.h"
#include "cohort/tensor/tensor.h"

namespace cohort::parallel::testing {

// max |a - b| / max |b| (shapes must match; a mismatch is "infinitely" wrong).
inline double rel_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, double(std::abs(x[i] - y[i])));
    scale = std::max(scale, double(std::abs(y[i])));
  }
  return diff / scale;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous_raw(), y = b.contiguous_raw();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Rank r's piece of `full` split along `dim` (parts blocks) over c shards.
inline Tensor piece(const Tensor& full, int64_t dim, int64_t parts, int c, int r) {
  return nn::take_shard(full.detach(), {.dim = dim, .parts = parts, .shards = c, .index = r});
}

}  // namespace cohort::parallel::testing
