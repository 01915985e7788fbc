// The index arithmetic of the GPU's strided gather (math::make_strided_view, strided_offset in
// kernels/cuda/strided_math.h), checked on the CPU against tensor/strided.h's for_each_offset:
// transposes, slices with steps, broadcasts and size-1 dims, 0 to 8 dims, in 64- and 32-bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <vector>

#include "cohort/kernels/cuda/strided_math.h"
#include "cohort/tensor/strided.h"

namespace cohort::cuda::math {
namespace {

// Offsets of every element of (shape, strides) in row-major order, as the CPU walks them.
std::vector<int64_t> cpu_offsets(const Shape& shape, const Shape& strides) {
  std::vector<int64_t> out;
  for_each_offset<1>(shape, {&strides}, [&](int64_t off) { out.push_back(off); });
  return out;
}

// What the kernel computes for each linear index, through the merged view.
template <typename I>
std::vector<int64_t> gpu_offsets(const Shape& shape, const Shape& strides) {
  const StridedView v = make_strided_view(shape.data(), strides.data(), int(shape.size()));
  const int64_t n = shape_numel(shape);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[size_t(k)] = int64_t(strided_offset<I>(v, I(k)));
  return out;
}

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

void expect_offsets_match(const Shape& shape, const Shape& strides) {
  const auto want = cpu_offsets(shape, strides);
  EXPECT_EQ(gpu_offsets<int64_t>(shape, strides), want) << ::testing::PrintToString(shape);
  EXPECT_EQ(gpu_offsets<int32_t>(shape, strides), want) << ::testing::PrintToString(shape);
}

TEST(StridedMath, ContiguousMergesToOneDim) {
  const Shape shape{2, 3, 4, 5};
  const StridedView v = make_strided_view(shape.data(), contiguous_strides(shape).data(), 4);
  ASSERT_EQ(v.ndim, 1);
  EXPECT_EQ(v.shape[0], 120);
  EXPECT_EQ(v.strides[0], 1);
  const Shape ones{1, 1, 1};
  EXPECT_EQ(make_strided_view(ones.data(), ones.data(), 3).ndim, 0);
  EXPECT_EQ(strided_offset<int64_t>(make_strided_view(nullptr, nullptr, 0), 0), 0);
}

TEST(StridedMath, TransposesAndSlicesMatchForEachOffset) {
  // [3, 4, 5] transposed (2, 0, 1): strides of the base permuted.
  expect_offsets_match({5, 3, 4}, {1, 20, 5});
  // A [4, 6] matrix transposed.
  expect_offsets_match({6, 4}, {1, 6});
  // x[::2, 1:5:3, :] of a [7, 8, 9] base: steps multiply strides.
  expect_offsets_match({4, 2, 9}, {144, 27, 1});
  // A column of a matrix, a broadcast row, size-1 dims between real ones.
  expect_offsets_match({10}, {7});
  expect_offsets_match({5, 6}, {0, 1});
  expect_offsets_match({1, 5, 1, 6, 1}, {99, 1, 42, 5, 3});
  // Mergeable pairs next to non-mergeable ones: [2, 3, 4, 5] permuted (0, 2, 3, 1).
  expect_offsets_match({2, 4, 5, 3}, {60, 5, 1, 20});
}

TEST(StridedMath, RandomPermutedSlicedViewsUpToEightDims) {
  std::mt19937 rng(3);
  for (int t = 0; t < 300; ++t) {
    const int nd = int(rng() % 9);  // 0 to 8 dims
    const size_t snd = static_cast<size_t>(nd);
    Shape base(snd), shape(snd), strides(snd);
    for (int d = 0; d < nd; ++d) base[d] = 1 + int64_t(rng() % (nd > 5 ? 3 : 5));
    const Shape base_strides = contiguous_strides(base);
    // A slice with a step along each dim, then a random permutation of the dims.
    Shape sliced(snd), sliced_strides(snd);
    for (int d = 0; d < nd; ++d) {
      const int64_t step = 1 + int64_t(rng() % 2);
      sliced[d] = (base[d] + step - 1) / step;
      sliced_strides[d] = base_strides[d] * step;
      if (rng() % 8 == 0) sliced_strides[d] = 0;  // broadcast
    }
    std::vector<int> perm(static_cast<size_t>(nd));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int d = 0; d < nd; ++d) {
      shape[d] = sliced[perm[d]];
      strides[d] = sliced_strides[perm[d]];
    }
    expect_offsets_match(shape, strides);
  }
}

TEST(StridedMath, Int32PathOnlyWhereEverythingFits) {
  const Shape small{1000, 1000}, small_strides{1, 1000};
  EXPECT_TRUE(
      strided_fits_int32(make_strided_view(small.data(), small_strides.data(), 2), 1000000));
  // Few elements, but the last one lies past 2^31: the offsets need int64.
  const Shape far{2, 3}, far_strides{int64_t{1} << 31, 1};
  const StridedView v = make_strided_view(far.data(), far_strides.data(), 2);
  EXPECT_FALSE(strided_fits_int32(v, 6));
  EXPECT_EQ(strided_offset<int64_t>(v, 4), (int64_t{1} << 31) + 1);
  const Shape many{int64_t{1} << 32}, one{1};
  EXPECT_FALSE(strided_fits_int32(make_strided_view(many.data(), one.data(), 1), int64_t{1} << 32));
}

}  // namespace
}  // namespace cohort::cuda::math
