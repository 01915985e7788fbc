#include "cohort/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "cohort/core/error.h"
#include "cohort/core/rng.h"

namespace cohort::data {

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t(0));
  Philox rng(seed);
  Philox::Block block{};
  for (int64_t i = n - 1, k = 0; i > 0; --i, ++k) {
    // Two 64-bit draws per Philox block.
    if (k % 2 == 0) block = rng.block(uint64_t(k / 2));
    uint64_t r = (uint64_t(block[2 * (k % 2) + 1]) << 32) | block[2 * (k % 2)];
    // j uniform in [0, i] by multiply-shift (Lemire); the bias is below 2^-40 for any n we see.
    int64_t j = int64_t((static_cast<unsigned __int128>(r) * uint64_t(i + 1)) >> 64);
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

DistributedSampler::DistributedSampler(int64_t size, int rank, int world, SamplerOptions options)
    : size_(size), rank_(rank), world_(world), options_(options) {
  COHORT_CHECK_ARG(world >= 1, "DistributedSampler: world ", world, " must be >= 1 (rank ", rank,
                   ")");
  COHORT_CHECK_ARG(rank >= 0 && rank < world, "DistributedSampler: rank ", rank,
                   " is out of range for world ", world, " (expected 0 <= rank < ", world, ")");
  COHORT_CHECK_ARG(size >= 0 || size == kSizeFromDataset, "DistributedSampler: size ", size,
                   " must be >= 0");
}

DistributedSampler::DistributedSampler(int rank, int world, SamplerOptions options)
    : DistributedSampler(kSizeFromDataset, rank, world, options) {}

DistributedSampler DistributedSampler::sequential(int64_t size) {
  return DistributedSampler(size, 0, 1, {.shuffle = false});
}
DistributedSampler DistributedSampler::random(int64_t size, uint64_t seed) {
  return DistributedSampler(size, 0, 1, {.shuffle = true, .seed = seed});
}

void DistributedSampler::bind_size(int64_t size) {
  if (size_ == kSizeFromDataset) {
    COHORT_CHECK_ARG(size >= 0, "DistributedSampler: size ", size, " must be >= 0");
    size_ = size;
    return;
  }
  COHORT_CHECK_ARG(size_ == size, "DistributedSampler: built for ", size_,
                   " samples but the dataset holds ", size);
}

int64_t DistributedSampler::num_samples() const {
  COHORT_CHECK_ARG(size_ != kSizeFromDataset,
                   "DistributedSampler: dataset size not set (hand the sampler to a Loader or "
                   "construct it with a size)");
  const int64_t rest = std::max<int64_t>(0, size_ - options_.skip);
  const int64_t share = options_.drop_last ? rest / world_ : (rest + world_ - 1) / world_;
  return options_.max_samples > 0 ? std::min(share, options_.max_samples) : share;
}

std::vector<int64_t> DistributedSampler::indices() const {
  const int64_t per_rank = num_samples();
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = random_permutation(size_, options_.seed + uint64_t(epoch_));
  } else {
    order.resize(size_t(size_));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  std::vector<int64_t> mine(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) {
    // Positions past the end wrap to the start: torch's padding (size > 0 whenever total > size).
    int64_t pos = options_.skip + rank_ + k * world_;
    mine[size_t(k)] = order[size_t(pos < size_ ? pos : pos % size_)];
  }
  return mine;
}

}  // namespace cohort::data
