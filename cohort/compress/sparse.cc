#include "cohort/compress/sparse.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "cohort/core/error.h"
#include "cohort/core/rng.h"

namespace cohort::compress {

size_t sparse_k(size_t numel, double ratio) {
  COHORT_CHECK_ARG(ratio > 0 && ratio <= 1, "sparse_k: ratio ", ratio, " is outside (0, 1]");
  if (numel == 0) return 0;
  auto k = size_t(std::llround(ratio * double(numel)));
  return std::clamp<size_t>(k, 1, numel);
}

namespace {

// |x| with NaN above every number, so a NaN gradient is always sent.
float magnitude(float x) {
  return std::isnan(x) ? INFINITY : std::fabs(x);
}

}  // namespace

std::vector<uint32_t> select_top_k(std::span<const float> v, size_t k) {
  COHORT_CHECK_ARG(k <= v.size(), "select_top_k: k = ", k, " > ", v.size(), " elements");
  COHORT_CHECK_ARG(v.size() <= UINT32_MAX, "select_top_k: ", v.size(),
                   " elements do not fit 32-bit indices");
  if (k == 0) return {};
  std::vector<float> mags(v.size());
  for (size_t i = 0; i < v.size(); ++i) mags[i] = magnitude(v[i]);
  // The k-th largest magnitude; then everything above it, and as many equal to it as fit, in
  // index order: the first k of the order (magnitude descending, index ascending).
  std::vector<float> work = mags;
  std::nth_element(work.begin(), work.begin() + ptrdiff_t(k - 1), work.end(), std::greater<>());
  const float threshold = work[k - 1];
  size_t above = 0;
  for (float m : mags) above += m > threshold;
  size_t equal_left = k - above;
  std::vector<uint32_t> idx;
  idx.reserve(k);
  for (size_t i = 0; i < mags.size(); ++i) {
    bool take = mags[i] > threshold;
    if (!take && mags[i] == threshold && equal_left > 0) {
      take = true;
      --equal_left;
    }
    if (take) idx.push_back(uint32_t(i));
  }
  return idx;
}

std::vector<uint32_t> select_random_k(size_t numel, size_t k, uint64_t seed, uint64_t round) {
  COHORT_CHECK_ARG(k <= numel, "select_random_k: k = ", k, " > ", numel, " elements");
  COHORT_CHECK_ARG(numel <= UINT32_MAX, "select_random_k: ", numel,
                   " elements do not fit 32-bit indices");
  Philox rng(seed);
  std::vector<uint64_t> taken((numel + 63) / 64, 0);  // a bitmap: read out in index order
  auto is_taken = [&](size_t i) { return (taken[i / 64] >> (i % 64)) & 1u; };
  // Floyd: for j in [numel - k, numel): draw t in [0, j]; take t, or j if t is taken already.
  for (size_t j = numel - k; j < numel; ++j) {
    auto b = rng.block(j, round);
    uint64_t r = (uint64_t(b[0]) << 32) | b[1];
    auto t = size_t((static_cast<unsigned __int128>(r) * (j + 1)) >> 64);
    size_t pick = is_taken(t) ? j : t;
    taken[pick / 64] |= uint64_t(1) << (pick % 64);
  }
  std::vector<uint32_t> out;
  out.reserve(k);
  for (size_t w = 0; w < taken.size(); ++w) {
    for (uint64_t bits = taken[w]; bits != 0; bits &= bits - 1)
      out.push_back(uint32_t(w * 64 + size_t(__builtin_ctzll(bits))));
  }
  return out;
}

}  // namespace cohort::compress
