#pragma once
// FlatLayout: a list of tensors laid end to end in one flat element space, split into `world`
// contiguous shards. The one flat layout of the tree: ZeRO (parallel/zero_*) keeps its
// parameters, gradients and optimizer state this way, a resharding checkpoint (ckpt/sharded.h)
// records the pieces it cuts, and the parameter server's key space (ps/partition.h) splits its
// keys over servers with the same shard_range and piece_of.
//
// Tensor i occupies [offset(i), offset(i) + numel(i)) of [0, total()). Where shard r of N lies
// is a ShardRule, fixed per user because it is visible outside the process:
//   kEqual     [r * S, min((r + 1) * S, total)) with S = ceil(total / N): every shard but the
//              last has S elements, the last may be shorter (or empty when total < N). ZeRO
//              pads its flat buffers to N * S so that reduce_scatter/allgather move equal
//              chunks, and its checkpoints' pieces are cut this way.
//   kBalanced  [r * total / N, (r + 1) * total / N) (floors): sizes differ by at most one and
//              no shard is empty while N <= total. Parameter servers own their keys this way
//              (a server with no keys would be useless; server checkpoints hold these ranges).
// The two agree only when N divides total, so neither can replace the other without moving
// data between ranks that existing checkpoints and jobs depend on.
#include <algorithm>
#include <cstdint>
#include <optional>
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
  int64_t size() const { return end - begin; }
};

enum class ShardRule { kEqual, kBalanced };

// Shard r of `world` over [0, total) under `rule` (see above).
inline FlatRange shard_range(int64_t total, int world, int r, ShardRule rule) {
  COHORT_CHECK_ARG(world >= 1 && r >= 0 && r < world, "FlatLayout: shard ", r, " of ", world);
  if (rule == ShardRule::kBalanced) return {total * r / world, total * (r + 1) / world};
  const int64_t s = (total + world - 1) / world;
  const int64_t b = std::min(total, int64_t(r) * s);
  return {b, std::min(total, b + s)};
}

// The piece of tensor `index`, at [offset, offset + numel) in the flat space, that falls in
// `range`; nullopt when none does.
inline std::optional<FlatPiece> piece_of(size_t index, int64_t offset, int64_t numel,
                                         FlatRange range) {
  const int64_t b = std::max(range.begin, offset);
  const int64_t e = std::min(range.end, offset + numel);
  if (b >= e) return std::nullopt;
  return FlatPiece{index, b - offset, e - offset, b};
}

class FlatLayout {
 public:
  FlatLayout() = default;
  FlatLayout(const std::vector<int64_t>& numels, int world, ShardRule rule = ShardRule::kEqual)
      : numels_(numels), world_(world), rule_(rule) {
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
  ShardRule rule() const { return rule_; }
  int64_t total() const { return total_; }
  size_t size() const { return numels_.size(); }
  int64_t numel(size_t i) const { return numels_.at(i); }
  int64_t offset(size_t i) const { return offsets_.at(i); }
  // The largest shard (ceil(total / world)): under kEqual, the size of every shard but the last.
  int64_t shard_size() const { return shard_size_; }

  FlatRange shard(int r) const { return shard_range(total_, world_, r, rule_); }

  // The shard that holds flat element `at`; for an empty tensor's offset (possibly total()),
  // the shard a resharding checkpoint records it in (ckpt/sharded.cc).
  int owner(int64_t at) const {
    if (rule_ == ShardRule::kEqual) {
      return shard_size_ > 0 ? int(std::min<int64_t>(world_ - 1, at / shard_size_)) : 0;
    }
    int r = 0;
    while (r + 1 < world_ && at >= shard(r).end) ++r;
    return r;
  }

  // The tensors' pieces inside `range`, in tensor order (empty pieces left out).
  std::vector<FlatPiece> pieces(FlatRange range) const {
    std::vector<FlatPiece> out;
    for (size_t i = 0; i < numels_.size(); ++i) {
      if (auto p = piece_of(i, offsets_[i], numels_[i], range)) out.push_back(*p);
    }
    return out;
  }
  std::vector<FlatPiece> pieces_of_shard(int r) const { return pieces(shard(r)); }

 private:
  std::vector<int64_t> numels_, offsets_;
  int64_t total_ = 0;
  int64_t shard_size_ = 0;
  int world_ = 1;
  ShardRule rule_ = ShardRule::kEqual;
};

}  // namespace cohort::ckpt
