#pragma once
// Elementwise kernels on device pointers, float32 unless named otherwise; the counterparts of
// kernels/cpu/elementwise.h with the same arguments plus the stream they run on. The ops layer
// resolves broadcasting into strides as it does for the CPU. Every kernel is asynchronous on
// `stream`; a bad launch throws CudaError.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda {

// out [rows, n] (contiguous) = a op b, element (r, i) of a at a[r * a_row + i * a_col] (the
// same for b); a stride of 0 broadcasts (cpu::binary_2d).
void binary_2d(math::Binary op, int64_t rows, int64_t n, const float* a, int64_t a_row,
               int64_t a_col, const float* b, int64_t b_row, int64_t b_col, float* out,
               cudaStream_t stream);

// out [n] = x [n] * scale + shift.
void affine(const float* x, float scale, float shift, float* out, int64_t n, cudaStream_t stream);

// out [n] = f(x [n]).
void unary(math::Unary op, const float* x, float* out, int64_t n, cudaStream_t stream);

// dx [n] = g [n] * f'(x): GELU (exact) and ReLU, from the forward input.
void gelu_backward(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream);
void relu_backward(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream);

// dx [n] = g [n] * f'(.) from the forward output y (tanh, sigmoid, sqrt): math::unary_grad.
void unary_backward(math::UnaryGrad op, const float* y, const float* g, float* dx, int64_t n,
                    cudaStream_t stream);
// out [n] = x [n] ^ p, and its backward dx = g * p * x^(p-1) (math::pow_value, pow_grad).
void pow_scalar(const float* x, float p, float* out, int64_t n, cudaStream_t stream);
void pow_scalar_backward(const float* x, float p, const float* g, float* dx, int64_t n,
                         cudaStream_t stream);

// g [outer, inner] -> out [outer, r, inner] = g * scale repeated along r (cpu::broadcast_middle:
// the backward of a sum or a mean).
void broadcast_middle(const float* g, int64_t outer, int64_t r, int64_t inner, float scale,
                      float* out, cudaStream_t stream);

// Conversions between float32 and bf16 (uint16 bit patterns), rounding to nearest even.
void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);

// x [n] = value.
void fill(float* x, float value, int64_t n, cudaStream_t stream);

}  // namespace cohort::cuda
