#pragma once
// Fused causal scaled-dot-product attention, float32.
//
// Per (batch, head), row by row: scores s_j = (q_t . k_j) / sqrt(Dh) for j <= t (the causal
// mask), p = softmax(s), out_t = sum_j p_j v_j. The T x T score matrix is never stored: forward
// keeps only each row's log-sum-exp, and backward recomputes p from it (as FlashAttention does).
// Parallel over B*H; within one head the order is fixed, so results do not depend on threads.
#include <cstdint>

namespace cohort::cpu {

struct AttnShape {
  int64_t b = 0, h = 0, t = 0, dh = 0;
};
// Element strides of a [B, H, T, Dh] view whose last dim is contiguous (stride 1). Lets q, k, v
// be permuted views of a fused qkv projection without a copy.
struct AttnStrides {
  int64_t b = 0, h = 0, t = 0;
};
struct AttnInputs {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  AttnStrides qs, ks, vs;
};

// q, k, v [B, H, T, Dh] -> out [B, H, T, Dh] contiguous; lse [B, H, T] (log-sum-exp of each
// row's scaled scores, for backward).
void causal_attention_forward(const AttnShape& s, const AttnInputs& in, float* out, float* lse);

// dout [B, H, T, Dh] contiguous, with the forward's inputs and lse -> dq, dk, dv
// [B, H, T, Dh] contiguous (overwritten). With p recomputed from lse, dp_j = dout_t . v_j and
// D_t = sum_j p_j dp_j:  ds_j = p_j (dp_j - D_t);  dq_t = scale sum_j ds_j k_j;
// dk_j += scale ds_j q_t;  dv_j += p_j dout_t.
void causal_attention_backward(const AttnShape& s, const AttnInputs& in, const float* dout,
                               const float* lse, float* dq, float* dk, float* dv);

// ---- bf16 (train.precision = "bf16"): what the GPU's tensor-core kernels compute ----
//
// Forward, per query row, over keys in tiles of kAttnBf16Tile from key 0: s_j = scale *
// (bf16(q_t) . bf16(k_j)) accumulated in f32; the online softmax in f32 (running max m and sum l
// updated once per tile, the earlier accumulation scaled by exp(m_old - m_new)); p_j =
// exp(s_j - m) with the tile's m, summed into l in f32 and rounded to bf16 for the product with
// bf16(v_j), accumulated in f32; out_t = acc * (1 / l), lse_t = m + log(l) in f32.
// Backward: D_t = bf16(dout_t) . out_t in f32 (the dout of dp, so that sum_j ds_j stays 0); p_j =
// exp(s_j - lse_t) in f32 (s_j as forward's); dp_j = bf16(dout_t) . bf16(v_j) in f32; ds_j = scale
// p_j (dp_j - D_t) in f32; then, with f32 accumulation, dv_j += bf16(p_j) bf16(dout_t), dk_j +=
// bf16(ds_j) bf16(q_t), dq_t += bf16(ds_j) bf16(k_j). Every bf16 rounding is to nearest even. The
// results equal the GPU's up to the order of f32 sums.
//
// The tile matters: p is rounded relative to the running max of its tile, so the emulation
// walks the same tiles as the kernels (64 keys; the GPU's blocks take 64 queries).
constexpr int64_t kAttnBf16Tile = 64;

// The head dims the bf16 attention covers (the GPU's kernels are built for these); any other
// runs the f32 functions above, on the CPU as on a GPU, so both give the same semantics.
constexpr bool attn_bf16_head_dim(int64_t dh) {
  return dh == 32 || dh == 64;
}

// As causal_attention_forward, in bf16 as above (f32 for other head dims).
void causal_attention_forward_bf16(const AttnShape& s, const AttnInputs& in, float* out,
                                   float* lse);

// As causal_attention_backward, in bf16 as above. `out` is forward's output (D_t = bf16(dout_t) .
// out_t, as FlashAttention-2 computes it, where the f32 version sums p_j dp_j: one pass over
// the keys fewer); unused for other head dims.
void causal_attention_backward_bf16(const AttnShape& s, const AttnInputs& in, const float* out,
                                    const float* dout, const float* lse, float* dq, float* dk,
                                    float* dv);

}  // namespace cohort::cpu
