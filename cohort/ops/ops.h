#pragma once
// Differentiable ops. Each checks its shapes (naming both), computes through kernels/cpu, and,
// when grad mode is on and an input requires grad, records a Node with its backward.
// Every op has a finite-difference gradient test in tests/ops/.
//
// Shapes are given as [N, C, H, W]-style comments above each op.
#include <cstdint>
#include <optional>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::ops {

// ---- elementwise (elementwise.cc) ----
// Binary ops broadcast like NumPy: shapes align at the right; a dim of 1 stretches.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& a, double s);
Tensor mul_scalar(const Tensor& a, double s);
Tensor pow_scalar(const Tensor& a, double p);
Tensor neg(const Tensor& a);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x), as torch.nn.GELU()
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
// The broadcast shape of a and b, or InvalidArgument naming both shapes and `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- reductions (reduce.cc) ----
// dims empty: reduce over every dim. Negative dims count from the end.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Max over one dim; the gradient goes to the first maximal element.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim);  // int64, no gradient
// Sums a gradient of the broadcast shape back down to `shape` (used by broadcasting backward).
Tensor sum_to(const Tensor& g, const Shape& shape);

// ---- softmax family and losses (softmax.cc) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// logits [N, C] float, targets [N] int64 in [0, C): mean over N of -log softmax(logits)[target].
// Fused: one pass forward, backward (softmax - onehot) / N.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

// ---- matmul (matmul.cc, OpenBLAS sgemm) ----
// [M, K] x [K, N] -> [M, N];  [B, M, K] x [B, K, N] -> [B, M, N];  [B, M, K] x [K, N] -> [B, M, N]
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in], weight [out, in], bias [out] or undefined -> [..., out]  (as
// torch.nn.functional.linear)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The precision of matmul's and linear's products, forward and backward (train.precision):
// kBF16 rounds both operands of every product to bf16 and accumulates in f32 (tensor cores on a
// GPU; emulated on the CPU, slower there); tensors, gradients and optimizer state stay f32.
// Process-wide: it is a property of the run. A product records the precision it ran with, so
// its backward uses the same one. Convolutions and the fused attention stay f32.
enum class MatmulPrecision : uint8_t { kF32, kBF16 };
MatmulPrecision matmul_precision();
// Sets the precision for its lifetime and restores the one before.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p);
  ~MatmulPrecisionScope();
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision before_;
};

// ---- convolution and pooling (conv.cc) ----
struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
};
// x [N, C, H, W], weight [O, C, KH, KW], bias [O] or undefined -> [N, O, H', W'],
// H' = (H + 2*padding - KH) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Conv2dOptions opt = {});
// x [N, C, H, W] -> [N, C, (H - k) / stride + 1, (W - k) / stride + 1]; stride 0 means k.
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0);

// ---- normalisation, embedding, dropout (norm.cc, embedding.cc, dropout.cc) ----
// Normalises over the last dim: x [..., D], weight [D], bias [D].
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// weight [V, D], indices int64 [...] -> [..., D]. An index outside [0, V) is InvalidArgument.
Tensor embedding(const Tensor& weight, const Tensor& indices);
// Zeroes each element with probability p and scales the rest by 1/(1-p). The mask comes from
// Philox(seed) at counter = element index, so it is the same for any thread count.
Tensor dropout(const Tensor& x, double p, uint64_t seed);

// ---- attention (attention.cc) ----
// Causal scaled-dot-product attention, fused: q, k, v [B, H, T, Dh] -> [B, H, T, Dh].
// Position t attends to positions <= t. Scale 1/sqrt(Dh).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v);

// ---- shape ops (views.cc, concat.cc) ----
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor contiguous(const Tensor& x);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);

}  // namespace cohort::ops

namespace cohort {
// Operators on tensors, for readable model code: (x - mu) * rstd.
inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return ops::add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return ops::sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return ops::mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return ops::div(a, b);
}
inline Tensor operator+(const Tensor& a, double s) {
  return ops::add_scalar(a, s);
}
inline Tensor operator-(const Tensor& a, double s) {
  return ops::add_scalar(a, -s);
}
inline Tensor operator*(const Tensor& a, double s) {
  return ops::mul_scalar(a, s);
}
inline Tensor operator/(const Tensor& a, double s) {
  return ops::mul_scalar(a, 1.0 / s);
}
inline Tensor operator*(double s, const Tensor& a) {
  return ops::mul_scalar(a, s);
}
inline Tensor operator-(const Tensor& a) {
  return ops::neg(a);
}
}  // namespace cohort
