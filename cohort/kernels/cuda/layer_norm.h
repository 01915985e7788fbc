#pragma once
// Layer normalisation over the last dimension, float32, contiguous rows, on device pointers: the
// counterpart of kernels/cpu/norm.h with the same arguments plus the stream. Every kernel is
// asynchronous on `stream`; a bad launch throws CudaError. Results are the same bits on every
// run: per-row statistics are merged across a block in a fixed tree, and dw / db are column
// sums with each column owned by one block (no atomics).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cohort/kernels/cpu/norm.h"

namespace cohort::cuda {

// x [rows, d], weight [d] or null (ones), bias [d] or null (zeros)
//   -> y [rows, d] = (x - mean) * rstd * weight + bias,
//      mean [rows], rstd [rows] = 1 / sqrt(var + eps) (biased variance), kept for backward.
// The statistics are Welford's (math::MeanVar per thread, merged across the block); the CPU
// sums twice. They agree to float rounding.
void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t d, float eps, float* y, float* mean, float* rstd,
                        cudaStream_t stream);

// Gradients to compute (device pointers); a null pointer skips that one. All are overwritten.
using LayerNormGrads = cpu::LayerNormGrads;

// dy [rows, d] with the forward's x, weight (or null), mean, rstd. With xhat = (x - mean) * rstd
// and gw = dy * weight:  dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),
//                        dw = sum over rows of dy * xhat,  db = sum over rows of dy.
// dw and db are summed in double per thread (rows split over 16 threads per column, in row
// order) and the 16 partial sums added in order: deterministic, and within float rounding of
// the CPU's row-order float sums.
void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t d, const LayerNormGrads& grads,
                         cudaStream_t stream);

}  // namespace cohort::cuda
