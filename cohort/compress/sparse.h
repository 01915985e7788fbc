#pragma once
// Which entries the sparsifying compressors send (compressor.h: top-k, random-k), exposed for
// tests and for callers that exchange indices themselves.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cohort::compress {

// k for `numel` elements at `ratio` in (0, 1]: max(1, round(ratio * numel)), at most numel.
size_t sparse_k(size_t numel, double ratio);

// The indices of the k largest |v|, ascending. Ties go to the lower index, so the choice is
// deterministic (NaN counts as the largest: it is sent, not hidden in the residual).
std::vector<uint32_t> select_top_k(std::span<const float> v, size_t k);

// k distinct indices of [0, numel), ascending, drawn uniformly (Floyd's algorithm) by Philox
// from (seed, round) alone: every rank that passes the same seed and round gets the same set.
std::vector<uint32_t> select_random_k(size_t numel, size_t k, uint64_t seed, uint64_t round);

}  // namespace cohort::compress
