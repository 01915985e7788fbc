#pragma once
// Which sample indices each rank visits in an epoch; torch.utils.data.DistributedSampler's
// contract, made platform independent.
//
// Per epoch: the indices 0..size-1, shuffled by Fisher-Yates driven by Philox(seed + epoch)
// when `shuffle`, are cut to a length divisible by `world` (drop_last: the tail is dropped)
// or extended to it (pad: indices repeat from the start of the list), and rank r takes
// positions r, r + world, r + 2 world, ... So shards are disjoint apart from padding, cover the
// data, are equal in length (ranks step in lockstep), and depend only on
// (size, world, seed, epoch): every rank computes the same permutation without talking.
#include <cstdint>
#include <vector>

namespace cohort::data {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  // false: pad the shards to equal length by repeating indices (every sample is seen);
  // true: drop the tail so shards are equal (no sample is seen twice in an epoch).
  bool drop_last = false;
  // > 0: each rank takes at most this many of its indices per epoch (the first of its share):
  // ranks with shards of their own step in lockstep on the smallest one's count.
  int64_t max_samples = 0;
  // Positions [0, skip) of each epoch's order were trained on already (by another split of the
  // job: elastic training re-deals the rest of an epoch to the workers left, docs/elastic.md);
  // rank r takes positions skip + r, skip + r + world, ... of the rest.
  int64_t skip = 0;
};

class DistributedSampler {
 public:
  // The dataset size is filled in by the Loader that receives this sampler.
  static constexpr int64_t kSizeFromDataset = -1;

  DistributedSampler(int64_t size, int rank, int world, SamplerOptions options = {});
  // Size taken from the dataset when handed to a Loader.
  DistributedSampler(int rank, int world, SamplerOptions options = {});
  // One worker: every index, in order or shuffled.
  static DistributedSampler sequential(int64_t size);
  static DistributedSampler random(int64_t size, uint64_t seed);

  // Sets the epoch whose permutation indices() returns (call before each epoch, as in torch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // Fixes the dataset size of a sampler made with kSizeFromDataset; checks it otherwise.
  void bind_size(int64_t size);

  // This rank's indices for the current epoch: num_samples() of them.
  std::vector<int64_t> indices() const;
  int64_t num_samples() const;  // per rank
  int64_t total_size() const { return num_samples() * world_; }
  int64_t size() const { return size_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  const SamplerOptions& options() const { return options_; }

 private:
  int64_t size_;
  int rank_;
  int world_;
  SamplerOptions options_;
  int64_t epoch_ = 0;
};

// A uniformly random permutation of 0..n-1: Fisher-Yates over Philox(seed). The same on every
// platform and standard library (std::shuffle is not).
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed);

}  // namespace cohort::data
