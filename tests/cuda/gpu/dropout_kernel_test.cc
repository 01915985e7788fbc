// kernels/cuda/dropout against cpu::dropout_apply: the same mask and the same bits, for sizes
// that end in a partial Philox block, pointers off the float4 path, in place, and sizes past one
// grid-stride pass.
#include "cohort/kernels/cuda/dropout.h"

#include <cstring>

#include "cohort/kernels/cpu/dropout.h"
#include "tests/cuda/gpu/gpu_test_util.h"

namespace cohort::cuda {
namespace {

using testing::random_floats;

// Bitwise: dropout is one multiply or a zero, so the GPU must give the CPU's exact bits.
::testing::AssertionResult same_bits(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " differ; first at " << first << ": GPU " << got[first]
         << ", CPU " << want[first];
}

TEST(CudaDropout, BitIdenticalToCpu) {
  COHORT_REQUIRE_GPU();
  for (int64_t n : {1, 3, 4, 5, 1001, 4099, 1000003}) {
    const auto x = random_floats(size_t(n), uint32_t(n));
    DeviceArray<float> dx(x), dy(x.size());
    std::vector<float> want(x.size());
    for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
        dropout_apply(dx.data(), n, p, seed, dy.data(), nullptr);
        cpu::dropout_apply(x.data(), n, p, seed, want.data());
        EXPECT_TRUE(same_bits(dy.download(), want)) << "n " << n << " p " << p << " seed " << seed;
      }
    }
  }
}

// x and y one float past a 16-byte boundary (the scalar path), and y == x (in place).
TEST(CudaDropout, UnalignedAndInPlace) {
  COHORT_REQUIRE_GPU();
  const int64_t n = 10007;
  const auto x = random_floats(size_t(n) + 1, 7);
  std::vector<float> want(static_cast<size_t>(n));
  cpu::dropout_apply(x.data() + 1, n, 0.3f, 5, want.data());
  DeviceArray<float> dx(x), dy(x.size());
  dropout_apply(dx.data() + 1, n, 0.3f, 5, dy.data() + 1, nullptr);
  auto got = dy.download();
  EXPECT_TRUE(same_bits(std::vector<float>(got.begin() + 1, got.end()), want)) << "unaligned";
  dropout_apply(dx.data() + 1, n, 0.3f, 5, dx.data() + 1, nullptr);
  got = dx.download();
  EXPECT_TRUE(same_bits(std::vector<float>(got.begin() + 1, got.end()), want)) << "in place";
}

// A large tensor: Philox counters past 2^22, tens of thousands of blocks.
TEST(CudaDropout, LargeTensorMatchesCpu) {
  COHORT_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 24) + 3;
  const auto x = random_floats(size_t(n), 11);
  std::vector<float> want(x.size());
  cpu::dropout_apply(x.data(), n, 0.1f, 99, want.data());
  DeviceArray<float> dx(x), dy(x.size());
  dropout_apply(dx.data(), n, 0.1f, 99, dy.data(), nullptr);
  EXPECT_TRUE(same_bits(dy.download(), want));
}

}  // namespace
}  // namespace cohort::cuda
