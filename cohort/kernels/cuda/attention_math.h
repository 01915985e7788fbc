#pragma once
// The fused causal attention's per-score arithmetic and tile bounds (attention.cu;
// tests/cuda/attention_math_test.cc).
#include "cohort/kernels/cpu/attention.h"
#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda::math {

// The flash-style kernels' per-score arithmetic and tile bounds. tests/cuda/attention_math_test.cc
// runs the kernels' tiling on the host with these and compares it with kernels/cpu/attention.

// Queries per block and keys per tile: one warp lane per key (or per query in dk/dv's pass).
constexpr int kAttnTile = 32;

// 1 / sqrt(Dh), the float kernels/cpu scales the scores by.
COHORT_HD float attn_scale(int64_t dh) {
  return 1.0f / sqrtf(float(dh));
}

// The causal mask: query t sees key j when j <= t.
COHORT_HD bool attn_visible(int64_t t, int64_t j) {
  return j <= t;
}

// The keys [0, end) the query tile starting at q0 needs: up to its last row, T cutting it short.
COHORT_HD int64_t attn_key_end(int64_t q0, int64_t t) {
  const int64_t e = q0 + kAttnTile;
  return e < t ? e : t;
}

// Online softmax of one query row: when the running max moves from m_old to m_new, what was
// accumulated (the sum of exponentials and the weighted values) is scaled by exp(m_old - m_new).
// Before the first tile m_old = -inf and nothing was accumulated: 0 (never exp(-inf + inf)).
COHORT_HD float attn_rescale(float m_old, float m_new) {
  return m_old == -INFINITY ? 0.f : expf(m_old - m_new);
}

// A row's log-sum-exp from its running max and sum, what forward keeps for backward.
COHORT_HD float attn_lse(float m, float l) {
  return m + logf(l);
}

// Backward's probability, recomputed from forward's log-sum-exp (kernels/cpu does the same).
COHORT_HD float attn_prob(float score, float lse) {
  return expf(score - lse);
}

// d loss / d (unscaled q.k) for one visible pair: scale p (dp - D), dp = dout_t . v_j and
// D = sum_j p_j dp_j of the row, in kernels/cpu's float order.
COHORT_HD float attn_dscore(float p, float dp, float big_d, float scale) {
  return scale * p * (dp - big_d);
}

// ---- bf16 tensor-core attention (train.precision = "bf16"; attention_bf16_*.cu, and
// kernels/cpu/attention_bf16.cc, which emulates it) ----

// Keys per tile and queries per block of the bf16 kernels (kernels/cpu/attention.h says why
// the CPU's emulation needs the same tiles), and the head dims they are built for.
constexpr int kAttnBf16Tile = int(cpu::kAttnBf16Tile);

COHORT_HD bool attn_bf16_head_dim(int64_t dh) {
  return cpu::attn_bf16_head_dim(dh);
}

// The keys [0, end) a bf16 query tile starting at q0 (a multiple of kAttnBf16Tile) needs.
COHORT_HD int64_t attn_bf16_key_end(int64_t q0, int64_t t) {
  const int64_t e = q0 + kAttnBf16Tile;
  return e < t ? e : t;
}

}  // namespace cohort::cuda::math
