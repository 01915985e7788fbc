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

}  // namespace cohort::cpu
