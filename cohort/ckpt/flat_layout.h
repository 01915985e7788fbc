#pragma once
// FlatLayout: a list of tensors laid end to end in one flat element space, split into `world`
// contiguous shards. ZeRO (parallel/zero_*) keeps its parameters, gradients and optimizer state
// this way, and a resharding checkpoint (ckpt/sharded.h) records the pieces it cuts.
//
// Tensor i occupies [offset(i), offset(i) + numel(i)) of [0, total()). Shard r of N holds
// [r * S, min((r + 1) * S, total())) with S = ceil(total / N): every shard but the last has S
// elements, the last may be shorter (or empty when total < N), so shards are uneven exactly as
// little as they can be.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::ckpt {

struct FlatRange {
  int64_t begin = 0, end = 0;  // [begin, end)
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// The part of tensor `index` that falls in a flat range: elements [begin, end) of the tensor's
// own row-major flattening, at `flat_begin` in the flat space.
struct FlatPiece {
  size_t index = 0;
  int64_t begin = 0, end = 0;
  int64_t flat_begin = 0;
};

class FlatLayout {
 public:
  FlatLayout() = default;
  FlatLayout(const std::vector<int64_t>& numels, int world) : numels_(numels), world_(world) {
    COHORT_CHECK_ARG(world >= 1, "FlatLayout: world size must be >= 1, got ", world);
    offsets_.reserve(numels.size());
    for (int64_t n : numels) {
      COHORT_CHECK_ARG(n >= 0, "FlatLayout: a tensor has a negative size ", n);
      offsets_.push_back(total_);
      total_ += n;
    }
    shard_size_ = (total_ + world - 1) / world;
  }

  int world() const { return world_; }
  int64_t total() const { return total_; }
  size_t size() const { return numels_.size(); }
  int64_t numel(size_t i) const { return numels_.at(i); }
  int64_t offset(size_t i) const { return offsets_.at(i); }
  // Elements per shard before the last (ceil(total / world)).
  int64_t shard_size() const { return shard_size_; }

  FlatRange shard(int r) const {
    COHORT_CHECK_ARG(r >= 0 && r < world_, "FlatLayout: shard ", r, " of ", world_);
    int64_t b = std::min(total_, int64_t(r) * shard_size_);
    return {b, std::min(total_, b + shard_size_)};
  }

  // The tensors' pieces inside `range`, in tensor order (empty pieces left out).
  std::vector<FlatPiece> pieces(FlatRange range) const {
    std::vector<FlatPiece> out;
    for (size_t i = 0; i < numels_.size(); ++i) {
      int64_t b = std::max(range.begin, offsets_[i]);
      int64_t e = std::min(range.end, offsets_[i] + numels_[i]);
      if (b < e) out.push_back({i, b - offsets_[i], e - offsets_[i], b});
    }
    return out;
  }
  std::vector<FlatPiece> pieces_of_shard(int r) const { return pieces(shard(r)); }

 private:
  std::vector<int64_t> numels_, offsets_;
  int64_t total_ = 0;
  int64_t shard_size_ = 0;
  int world_ = 1;
};

}  // namespace cohort::ckpt
