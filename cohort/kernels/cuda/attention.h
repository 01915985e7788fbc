#pragma once
// Fused causal scaled-dot-product attention on the GPU, float32: kernels/cpu/attention.h's two
// functions with the same structs and arguments (device pointers here) plus the stream they run
// on. Scores s_j = (q_t . k_j) / sqrt(Dh) for j <= t, p = softmax(s), out_t = sum_j p_j v_j.
//
// Flash-attention style: a block takes 32 queries of one head and walks the keys 32 at a time
// through shared memory with an online softmax, so no T x T matrix ever exists. Backward
// recomputes p from forward's log-sum-exp (FlashAttention-2): one kernel per key tile writes
// dk, dv and one per query tile writes dq, each output written by one thread in a fixed order,
// so the results are the same bits on every run (no atomics).
//
// Requirements: Dh <= 128 (kMaxHeadDim; more throws InvalidArgument); the last dim of q, k, v
// contiguous (the strides name the other three, as on the CPU); all pointers on the current
// device. Every call is asynchronous on `stream`; a bad launch throws CudaError.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cohort/kernels/cpu/attention.h"

namespace cohort::cuda {

using cpu::AttnInputs;
using cpu::AttnShape;
using cpu::AttnStrides;

// The largest head dim the kernels hold in registers (GPT-2 uses 64).
constexpr int64_t kMaxHeadDim = 128;

// q, k, v [B, H, T, Dh] (strided views) -> out [B, H, T, Dh] contiguous; lse [B, H, T] (the
// log-sum-exp of each row's scaled scores, kept for backward).
void causal_attention_forward(const AttnShape& s, const AttnInputs& in, float* out, float* lse,
                              cudaStream_t stream);

// dout [B, H, T, Dh] contiguous, with forward's inputs and lse -> dq, dk, dv [B, H, T, Dh]
// contiguous (overwritten): ds_j = p_j (dp_j - D_t) with dp_j = dout_t . v_j and
// D_t = sum_j p_j dp_j; dq_t = scale sum_j ds_j k_j; dk_j = scale sum_t ds_j q_t;
// dv_j = sum_t p_j dout_t. dq doubles as the scratch for D until its own kernel overwrites it,
// so backward needs no memory of its own.
void causal_attention_backward(const AttnShape& s, const AttnInputs& in, const float* dout,
                               const float* lse, float* dq, float* dk, float* dv,
                               cudaStream_t stream);

// train.precision = "bf16": the same on tensor cores (nvcuda::wmma bf16 16x16x16 fragments, f32
// accumulation), FlashAttention-2 style, with the semantics kernels/cpu/attention.h states
// (cpu::causal_attention_forward_bf16 emulates them). Built for Dh 32 and 64 (attn_bf16_head_dim);
// any other Dh runs the f32 kernels above. Blocks of 64 queries (4 warps of 16 rows) walk key
// tiles of 64 through shared memory, so no T x T matrix exists. Backward: a kernel writes
// D_t = bf16(dout_t) . out_t into dq's first column (the scratch, as above), one kernel per key
// tile writes dk, dv and one per query tile writes dq, each recomputing p from lse: no atomics, the
// same bits on every run. Needs an sm_80+ GPU (bf16 wmma).
void causal_attention_forward_bf16(const AttnShape& s, const AttnInputs& in, float* out, float* lse,
                                   cudaStream_t stream);

// `out` is forward's output (contiguous), for D; unused where Dh falls back to f32.
void causal_attention_backward_bf16(const AttnShape& s, const AttnInputs& in, const float* out,
                                    const float* dout, const float* lse, float* dq, float* dk,
                                    float* dv, cudaStream_t stream);

}  // namespace cohort::cuda
