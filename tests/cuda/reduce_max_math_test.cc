// The merge behind the GPU's max over a dim (math::ArgMax in kernels/cuda/argmax_math.h),
// checked on the CPU against cpu::max_middle: scanning in order and merging pieces in any tree
// (what a block's threads do) both give the CPU's value and first maximal position, with NaNs,
// ties, signed zeros and rows of -inf.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cohort/kernels/cpu/reduce.h"
#include "cohort/kernels/cuda/argmax_math.h"

namespace cohort::cuda::math {
namespace {

// Values from a small set so that ties are common, with NaNs and infinities mixed in.
std::vector<float> tie_heavy_floats(size_t n, uint32_t seed, bool with_nan) {
  std::mt19937 rng(seed);
  const float pool[] = {-INFINITY, -2.f, -1.f, -0.f, 0.f, 1.f, 3.f, 3.f, INFINITY};
  std::vector<float> v(n);
  for (float& x : v) x = pool[rng() % 9];
  if (with_nan)
    for (float& x : v)
      if (rng() % 11 == 0) x = NAN;
  return v;
}

// The row's candidate merged as a random binary tree of pieces (any split a launch may make).
ArgMax tree_merge(const std::vector<float>& row, size_t lo, size_t hi, std::mt19937& rng) {
  if (hi - lo == 1) return argmax_add(ArgMax{}, row[lo], int64_t(lo));
  const size_t mid = lo + 1 + rng() % (hi - lo - 1);
  const ArgMax a = tree_merge(row, lo, mid, rng), b = tree_merge(row, mid, hi, rng);
  return rng() % 2 ? argmax_merge(a, b) : argmax_merge(b, a);
}

void expect_same(ArgMax got, float want_val, int64_t want_idx, const char* how) {
  EXPECT_EQ(got.idx, want_idx) << how;
  if (std::isnan(want_val))
    EXPECT_TRUE(std::isnan(got.val)) << how;
  else
    EXPECT_EQ(got.val, want_val) << how;  // == : +0 and -0 tie, as in the CPU's scan
}

TEST(ReduceMaxMath, ScanAndTreeMatchCpuMaxMiddle) {
  std::mt19937 rng(11);
  for (int64_t r : {1, 2, 7, 8, 9, 33, 300}) {
    for (bool with_nan : {false, true}) {
      const int64_t outer = 5;
      const auto x = tie_heavy_floats(size_t(outer * r), uint32_t(r * 2 + with_nan), with_nan);
      std::vector<float> val(outer);
      std::vector<int64_t> idx(outer);
      cpu::max_middle(x.data(), outer, r, 1, val.data(), idx.data());  // the row path
      for (int64_t o = 0; o < outer; ++o) {
        const std::vector<float> row(x.begin() + o * r, x.begin() + (o + 1) * r);
        ArgMax scan;
        for (int64_t j = 0; j < r; ++j) scan = argmax_add(scan, row[j], j);
        expect_same(scan, val[o], idx[o], "scan");
        for (int t = 0; t < 5; ++t)
          expect_same(tree_merge(row, 0, row.size(), rng), val[o], idx[o], "tree");
      }
    }
  }
}

TEST(ReduceMaxMath, ColumnsMatchCpuMaxMiddle) {
  const int64_t outer = 3, r = 17, inner = 6;
  const auto x = tie_heavy_floats(size_t(outer * r * inner), 4, true);
  std::vector<float> val(outer * inner);
  std::vector<int64_t> idx(outer * inner);
  cpu::max_middle(x.data(), outer, r, inner, val.data(), idx.data());  // the column path
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      // The GPU's column kernel: 8 strided scans, merged in order.
      ArgMax parts[8];
      for (int64_t j = 0; j < r; ++j)
        parts[j % 8] = argmax_add(parts[j % 8], x[(o * r + j) * inner + i], j);
      ArgMax a = parts[0];
      for (int g = 1; g < 8; ++g) a = argmax_merge(a, parts[g]);
      expect_same(a, val[o * inner + i], idx[o * inner + i], "columns");
    }
  }
}

TEST(ReduceMaxMath, EdgeCases) {
  // All -inf: the first position; the empty candidate loses to everything.
  ArgMax a;
  for (int64_t j = 0; j < 4; ++j) a = argmax_add(a, -INFINITY, j);
  EXPECT_EQ(a.idx, 0);
  EXPECT_EQ(argmax_merge(ArgMax{}, ArgMax{-INFINITY, 5}).idx, 5);
  // The first NaN wins over later NaNs and over +inf before it.
  a = ArgMax{};
  const float row[] = {INFINITY, NAN, 1.f, NAN};
  for (int64_t j = 0; j < 4; ++j) a = argmax_add(a, row[j], j);
  EXPECT_EQ(a.idx, 1);
  EXPECT_TRUE(std::isnan(a.val));
  // Ties: the smaller position, whichever side it comes from.
  EXPECT_EQ(argmax_merge(ArgMax{2.f, 7}, ArgMax{2.f, 3}).idx, 3);
  EXPECT_EQ(argmax_merge(ArgMax{0.f, 7}, ArgMax{-0.f, 3}).idx, 3);
}

}  // namespace
}  // namespace cohort::cuda::math
