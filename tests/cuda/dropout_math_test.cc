// Dropout's mask as the CUDA kernel computes it (math::philox4x32_10, math::dropout_value in
// kernels/cuda/philox_math.h), checked on the CPU bit for bit against core/rng.h's Philox and
// cpu::dropout_apply: a GPU run that passes its launch test drops exactly the CPU's elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cohort/core/rng.h"
#include "cohort/kernels/cpu/dropout.h"
#include "cohort/kernels/cuda/philox_math.h"
#include "tests/cuda/random_floats.h"

namespace cohort::cuda::math {
namespace {

using testing::random_floats;

// Bitwise equality, so -0 vs +0 and NaN payloads count; names the first differing element.
::testing::AssertionResult same_bits(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": GPU formula " << got[i] << ", CPU " << want[i];
  }
  return ::testing::AssertionSuccess();
}

const uint64_t kSeeds[] = {0, 1, 42, 0xDEADBEEFCAFEF00Dull, derive_seed(7, "dropout")};

TEST(DropoutMath, PhiloxMatchesCoreRng) {
  std::mt19937_64 rng(5);
  for (uint64_t seed : kSeeds) {
    const Philox ref(seed);
    for (int t = 0; t < 200; ++t) {
      // Small counters (what dropout uses) and full 128-bit ones (every word of the counter).
      const uint64_t lo = t < 100 ? uint64_t(t) : rng(), hi = t < 100 ? 0 : rng();
      const Philox::Block want = ref.block(lo, hi);
      const PhiloxBlock got = philox4x32_10(seed, lo, hi);
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(got.v[k], want[size_t(k)]) << "seed " << seed << " ctr " << lo << ":" << hi;
    }
  }
}

TEST(DropoutMath, UnitMatchesCoreRng) {
  for (uint32_t bits : {0u, 255u, 256u, 0x80000000u, 0xFFFFFF00u, 0xFFFFFFFFu})
    EXPECT_EQ(philox_unit(bits), Philox::to_unit(bits)) << bits;
  EXPECT_LT(philox_unit(0xFFFFFFFFu), 1.0f);
}

// The kernel's per-element formula, element by element and block by block (the kernel's
// grouping), reproduces cpu::dropout_apply for every seed, p and size, including sizes that end
// in a partial Philox block.
TEST(DropoutMath, ElementFormulaIsCpuDropoutBitForBit) {
  for (int64_t n : {1, 3, 4, 5, 7, 8, 1001, 4099, 20003}) {
    std::vector<float> x = random_floats(size_t(n), uint32_t(n));
    x[0] = -0.0f;  // kept: -0 * scale = -0; dropped: +0, as the CPU writes
    if (n > 2) x[2] = INFINITY;
    for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
      for (uint64_t seed : kSeeds) {
        std::vector<float> want(x.size()), by_element(x.size()), by_block(x.size());
        cpu::dropout_apply(x.data(), n, p, seed, want.data());
        const float scale = dropout_scale(p);
        for (int64_t i = 0; i < n; ++i) by_element[i] = dropout_element(x[i], i, p, scale, seed);
        for (int64_t b = 0; 4 * b < n; ++b) {
          const PhiloxBlock r = philox4x32_10(seed, uint64_t(b));
          for (int64_t k = 0; k < 4 && 4 * b + k < n; ++k)
            by_block[4 * b + k] = dropout_value(x[4 * b + k], r.v[k], p, scale);
        }
        EXPECT_TRUE(same_bits(by_element, want)) << "n " << n << " p " << p << " seed " << seed;
        EXPECT_TRUE(same_bits(by_block, want)) << "n " << n << " p " << p << " seed " << seed;
      }
    }
  }
}

TEST(DropoutMath, KeepsAboutOneMinusP) {
  const int64_t n = 100000;
  for (float p : {0.1f, 0.5f, 0.9f}) {
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) kept += dropout_element(1.0f, i, p, 1.0f, 3) != 0.0f;
    EXPECT_NEAR(double(kept) / n, 1.0 - p, 0.01) << "p " << p;
  }
  // p = 0 keeps everything unscaled; a different seed gives a different mask.
  EXPECT_EQ(dropout_element(2.5f, 17, 0.0f, dropout_scale(0.0f), 9), 2.5f);
  int64_t differ = 0;
  for (int64_t i = 0; i < 1000; ++i)
    differ += (dropout_element(1.f, i, 0.5f, 2.f, 1) != dropout_element(1.f, i, 0.5f, 2.f, 2));
  EXPECT_GT(differ, 300);
}

}  // namespace
}  // namespace cohort::cuda::math
