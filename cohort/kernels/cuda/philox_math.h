#pragma once
// Dropout's mask on the GPU: core/rng.h's Philox4x32-10 and the keep decision of
// kernels/cpu/dropout.cc, bit for bit, for the host and the device (dropout.cu;
// tests/cuda/dropout_math_test.cc).
#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda::math {

// ---- Philox4x32-10: core/rng.h's generator, bit for bit ------------------------------------

struct PhiloxBlock {
  uint32_t v[4];
};

// The high 32 bits of a 32 x 32-bit product (one instruction on the GPU).
COHORT_HD uint32_t mul_hi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t(a) * b) >> 32);
#endif
}

// Philox(seed).block(ctr_lo, ctr_hi): the same rounds, constants and word order as core/rng.h.
COHORT_HD PhiloxBlock philox4x32_10(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi = 0) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = uint32_t(ctr_lo), c1 = uint32_t(ctr_lo >> 32), c2 = uint32_t(ctr_hi),
           c3 = uint32_t(ctr_hi >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  COHORT_UNROLL
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mul_hi32(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = mul_hi32(kMul1, c2), lo1 = kMul1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// Philox::to_unit: the top 24 bits as a float in [0, 1) (exact: no rounding anywhere).
COHORT_HD float philox_unit(uint32_t bits) {
  return float(bits >> 8) * (1.0f / 16777216.0f);
}

// cpu::dropout_apply's scale, 1 / (1 - p) in float (the host computes it once per launch).
COHORT_HD float dropout_scale(float p) {
  return 1.0f / (1.0f - p);
}

// One element of cpu::dropout_apply given its Philox word: kept (x * scale) when the word's
// uniform is >= p, else +0. One float multiply, so there is nothing for FMA contraction to change.
COHORT_HD float dropout_value(float x, uint32_t bits, float p, float scale) {
  return philox_unit(bits) >= p ? x * scale : 0.0f;
}

// Element i on its own: word i % 4 of Philox block i / 4 (Philox::uniform's layout).
COHORT_HD float dropout_element(float x, int64_t i, float p, float scale, uint64_t seed) {
  return dropout_value(x, philox4x32_10(seed, uint64_t(i) / 4).v[i % 4], p, scale);
}

}  // namespace cohort::cuda::math
