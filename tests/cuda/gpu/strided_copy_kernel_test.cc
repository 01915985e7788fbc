// kernels/cuda/strided_copy against a host gather (tensor/strided.h's for_each_offset): the
// views Tensor::contiguous() meets (transposes, permutes, slices with steps, broadcasts, offsets,
// 0 to 8 dims) for every element size, bit for bit.
#include "cohort/kernels/cuda/strided_copy.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "cohort/tensor/strided.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

// Distinct-looking bits for element k of a base buffer, whatever T's width.
template <typename T>
std::vector<T> pattern(size_t n) {
  std::vector<T> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = T(uint64_t(k) * 0x9E3779B97F4A7C15ull + (k >> 3));
  return v;
}

// base viewed with (shape, strides) from `offset`, gathered in row-major order on the host.
template <typename T>
std::vector<T> host_gather(const std::vector<T>& base, int64_t offset, const Shape& shape,
                           const Shape& strides) {
  std::vector<T> out;
  for_each_offset<1>(shape, {&strides},
                     [&](int64_t off) { out.push_back(base[size_t(offset + off)]); });
  return out;
}

// The view's elements copied on the GPU equal the host gather; base_numel covers the view.
template <typename T>
void check_view(int64_t base_numel, int64_t offset, const Shape& shape, const Shape& strides) {
  const auto base = pattern<T>(size_t(base_numel));
  const auto want = host_gather(base, offset, shape, strides);
  DeviceArray<T> dsrc(base), ddst(std::max<size_t>(want.size(), 1));
  strided_copy(dsrc.data(), offset, shape.data(), strides.data(), int(shape.size()), sizeof(T),
               ddst.data(), nullptr);
  auto got = ddst.download();
  got.resize(want.size());
  EXPECT_EQ(got, want) << "elem " << sizeof(T) << " shape " << ::testing::PrintToString(shape)
                       << " strides " << ::testing::PrintToString(strides) << " offset " << offset;
}

template <typename T>
void check_fixed_views() {
  check_view<T>(64 * 48, 0, {48, 64}, {1, 48});         // a matrix transposed
  check_view<T>(5 * 6 * 7, 0, {7, 5, 6}, {1, 42, 7});   // [5, 6, 7] permuted (2, 0, 1)
  check_view<T>(5 * 6 * 7, 0, {6, 7, 5}, {7, 1, 42});   // permuted (1, 2, 0)
  check_view<T>(20 * 30, 2 * 30 + 1, {6, 8}, {90, 4});  // x[2:18:3, 1::4]
  check_view<T>(1000, 3, {997}, {1});                   // contiguous from an offset: memcpy
  check_view<T>(300, 0, {4, 75}, {0, 1});               // a row broadcast to 4 rows
  check_view<T>(50, 17, {}, {});                        // 0 dims: one element
  check_view<T>(50, 0, {3, 0, 4}, {0, 4, 1});           // empty: nothing written
  check_view<T>(256, 0, {2, 2, 2, 2, 2, 2, 2, 2}, {1, 2, 4, 8, 16, 32, 64, 128});  // 8 dims
  check_view<T>(1 << 20, 0, {1024, 1024}, {1, 1024});  // large transpose
}

TEST(CudaStridedCopy, FixedViewsEveryElementSize) {
  COHORT_REQUIRE_GPU();
  check_fixed_views<uint8_t>();
  check_fixed_views<uint16_t>();
  check_fixed_views<uint32_t>();
  check_fixed_views<uint64_t>();
}

// Random slices with steps of a random base, dims permuted, 1 to 6 dims, every element size.
template <typename T>
void check_random_views(uint32_t seed) {
  std::mt19937 rng(seed);
  for (int t = 0; t < 40; ++t) {
    const int nd = 1 + int(rng() % 6);
    Shape base(static_cast<size_t>(nd)), shape(base), strides(base);
    for (int64_t& b : base) b = 1 + int64_t(rng() % (nd > 4 ? 6 : 12));
    int64_t numel = 1, offset = 0;
    std::vector<int64_t> base_strides(base.size());
    for (int d = nd - 1; d >= 0; --d) {
      base_strides[size_t(d)] = numel;
      numel *= base[size_t(d)];
    }
    std::vector<int> perm(base.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int d = 0; d < nd; ++d) {
      const size_t p = size_t(perm[size_t(d)]);
      const int64_t start = int64_t(rng() % uint64_t(base[p])), step = 1 + int64_t(rng() % 3);
      offset += start * base_strides[p];
      shape[size_t(d)] = (base[p] - start + step - 1) / step;
      strides[size_t(d)] = base_strides[p] * step;
    }
    check_view<T>(numel, offset, shape, strides);
  }
}

TEST(CudaStridedCopy, RandomSlicedPermutedViews) {
  COHORT_REQUIRE_GPU();
  check_random_views<uint8_t>(1);
  check_random_views<uint16_t>(2);
  check_random_views<uint32_t>(3);
  check_random_views<uint64_t>(4);
}

// Offsets past 2^31 elements take the 64-bit index path: a view whose second row starts 2^31
// bytes in. Only the bytes read are set on the device (no 2 GiB host buffer).
TEST(CudaStridedCopy, OffsetsPastInt32) {
  COHORT_REQUIRE_GPU();
  const int64_t row = int64_t{1} << 31;
  DeviceArray<uint8_t> big(size_t(row + 8));
  const uint8_t first[3] = {1, 2, 3}, second[3] = {4, 5, 6};
  COHORT_CUDA_CHECK(cudaMemcpy(big.data() + 5, first, 3, cudaMemcpyHostToDevice));
  COHORT_CUDA_CHECK(cudaMemcpy(big.data() + 5 + row, second, 3, cudaMemcpyHostToDevice));
  COHORT_CUDA_CHECK(cudaDeviceSynchronize());  // landed before the non-blocking stream reads it
  const int64_t shape[2] = {2, 3}, strides[2] = {row, 1};
  DeviceArray<uint8_t> dst(6);
  strided_copy(big.data(), 5, shape, strides, 2, 1, dst.data(), nullptr);
  EXPECT_EQ(dst.download(), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

// Arguments are checked before anything touches the device: this runs without a GPU.
// strided_scatter writes a contiguous source into the view's places and leaves the rest of dst
// as it was: a slice with steps, a transpose, an offset window.
template <typename T>
void check_scatter(int64_t base_numel, int64_t offset, const Shape& shape, const Shape& strides) {
  const auto base = pattern<T>(size_t(base_numel));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<T> src(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) src[size_t(k)] = T(~uint64_t(k));
  std::vector<T> want = base;
  int64_t k = 0;
  for_each_offset<1>(shape, {&strides},
                     [&](int64_t off) { want[size_t(offset + off)] = src[size_t(k++)]; });
  DeviceArray<T> dsrc(src), ddst(base);
  strided_scatter(dsrc.data(), shape.data(), strides.data(), int(shape.size()), sizeof(T),
                  ddst.data(), offset, nullptr);
  EXPECT_EQ(ddst.download(), want)
      << "elem " << sizeof(T) << " shape " << ::testing::PrintToString(shape);
}

TEST(CudaStridedCopy, ScatterWritesOnlyTheViewsPlaces) {
  COHORT_REQUIRE_GPU();
  check_scatter<float>(64 * 48, 0, {48, 64}, {1, 48});  // into a transposed view
  check_scatter<float>(10 * 30, 3, {10, 9}, {30, 3});   // a slice with step 3, offset 3
  check_scatter<uint64_t>(5 * 7 * 11, 12, {4, 3, 2}, {77, 11, 5});
  check_scatter<uint16_t>(1000, 0, {1000}, {1});  // contiguous: one memcpy
  const Shape shape{4, 4}, zero_stride{4, 0};
  DeviceArray<float> a(16), b(16);
  EXPECT_THROW(
      strided_scatter(a.data(), shape.data(), zero_stride.data(), 2, 4, b.data(), 0, nullptr),
      InvalidArgument)
      << "two elements written to one place";
}

TEST(CudaStridedCopy, RejectsTooManyDimsAndOddElementSizes) {
  const int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, strides[9] = {};
  EXPECT_THROW(strided_copy(nullptr, 0, shape, strides, 9, 4, nullptr, nullptr), InvalidArgument);
  EXPECT_THROW(strided_copy(nullptr, 0, shape, strides, 2, 3, nullptr, nullptr), InvalidArgument);
}

}  // namespace
}  // namespace cohort::cuda
