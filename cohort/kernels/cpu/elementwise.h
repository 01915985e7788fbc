#pragma once
// Elementwise float32 kernels on raw pointers. The ops layer (ops/elementwise.cc) checks
// shapes, resolves broadcasting into strides and calls these; nothing here knows Tensor.
// Every kernel splits large ranges over the intra-op pool (parallel_for, ~32K elements a chunk)
// so that small tensors stay on the calling thread.
#include <cstdint>

namespace cohort::cpu {

// Elements per parallel_for chunk: large enough that a chunk outweighs the pool's wake-up.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };

// out [rows, n] (contiguous) = a op b, where element (r, i) of a is a[r * a_row + i * a_col]
// (same for b). A stride of 0 broadcasts; the (1, 1), (1, 0) and (0, 1) inner stride pairs
// run vectorised loops:
//   same shape:        a_col = b_col = 1
//   row broadcast:     [N, D] op [D]     -> rows N, n D, b_row 0
//   column broadcast:  [N, D] op [N, 1]  -> rows N, n D, b_col 0
void binary_2d(BinaryOp op, int64_t rows, int64_t n, const float* a, int64_t a_row, int64_t a_col,
               const float* b, int64_t b_row, int64_t b_col, float* out);

// out [n] = a [n] op b [n], all contiguous.
inline void binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  binary_2d(op, 1, n, a, 0, 1, b, 0, 1, out);
}

// out [n] = x [n] * scale + shift  (add_scalar, mul_scalar, neg).
void affine(const float* x, float scale, float shift, float* out, int64_t n);

enum class UnaryOp : uint8_t { kRelu, kGelu, kTanh, kSigmoid, kExp, kLog, kSqrt };

// out [n] = f(x [n]). GELU is the exact x * Phi(x) (torch.nn.GELU()).
void unary(UnaryOp op, const float* x, float* out, int64_t n);
// out [n] = x [n] ^ p.
void pow_scalar(const float* x, float p, float* out, int64_t n);

// Backward kernels: dx [n] = g [n] * f'(.), all contiguous. Those taking y use the forward
// output (cheaper than recomputing f); those taking x use the forward input.
void relu_backward(const float* x, const float* g, float* dx, int64_t n);     // g * (x > 0)
void gelu_backward(const float* x, const float* g, float* dx, int64_t n);     // g * (Phi + x phi)
void tanh_backward(const float* y, const float* g, float* dx, int64_t n);     // g * (1 - y^2)
void sigmoid_backward(const float* y, const float* g, float* dx, int64_t n);  // g * y (1 - y)
void sqrt_backward(const float* y, const float* g, float* dx, int64_t n);     // g * 0.5 / y
void pow_scalar_backward(const float* x, float p, const float* g, float* dx,
                         int64_t n);  // g * p * x^(p-1)

}  // namespace cohort::cpu
