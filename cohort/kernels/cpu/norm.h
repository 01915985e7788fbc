#pragma once
// Layer normalisation over the last dimension, float32, contiguous rows.
#include <cstdint>

namespace cohort::cpu {

// x [rows, d], weight [d] or null (ones), bias [d] or null (zeros)
//   -> y [rows, d] = (x - mean) * rstd * weight + bias,
//      mean [rows], rstd [rows] = 1 / sqrt(var + eps) (biased variance), kept for backward.
void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t d, float eps, float* y, float* mean, float* rstd);

// Gradients to compute; a null pointer skips that one. All are overwritten.
struct LayerNormGrads {
  float* dx = nullptr;  // [rows, d]
  float* dw = nullptr;  // [d]
  float* db = nullptr;  // [d]
};
// dy [rows, d] with the forward's x, weight, mean, rstd. With xhat = (x - mean) * rstd and
// gw = dy * weight:  dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),
//                    dw = sum over rows of dy * xhat,  db = sum over rows of dy.
void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t d, const LayerNormGrads& grads);

}  // namespace cohort::cpu
