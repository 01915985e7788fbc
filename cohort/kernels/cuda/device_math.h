#pragma once
// The arithmetic of the CUDA kernels, as functions compiled for both the host and the device:
// the kernels call them per element or per row, and CPU tests (tests/cuda/device_math_test.cc)
// check them against kernels/cpu on any machine. So most of what a kernel computes is verified
// without a GPU; what is left for the GPU is the launch (indexing, shared memory, reductions
// across threads), which the GPU tests compare with kernels/cpu.
//
// Plain C++ may include this header: COHORT_HD is empty there.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cohort/kernels/cpu/optim.h"

#if defined(__CUDACC__)
#define COHORT_HD __host__ __device__ __forceinline__
#else
#define COHORT_HD inline
#endif

// A loop the device compiler unrolls (fixed trip counts in the kernels' index arithmetic).
#if defined(__CUDA_ARCH__)
#define COHORT_UNROLL _Pragma("unroll")
#else
#define COHORT_UNROLL
#endif

namespace cohort::cuda::math {

// ---- bf16: the top half of an f32 ----------------------------------------------------------

COHORT_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

COHORT_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Rounded to nearest, ties to even (what torch's .to(bfloat16) and cuda_bf16.h do); a NaN stays
// a (quiet) NaN, infinities stay infinite, a value past bf16's largest rounds to infinity.
COHORT_HD uint16_t bf16_from_f32(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN: quiet it
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return uint16_t((u + rounding) >> 16);
}

COHORT_HD float f32_from_bf16(uint16_t b) {
  return f32_from_bits(uint32_t(b) << 16);
}

// ---- elementwise ---------------------------------------------------------------------------

enum class Binary : uint8_t { kAdd, kSub, kMul, kDiv };  // the order of cpu::BinaryOp

COHORT_HD float apply_binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::kAdd:
      return a + b;
    case Binary::kSub:
      return a - b;
    case Binary::kMul:
      return a * b;
    default:
      return a / b;
  }
}

// The standard normal CDF, 0.5 erfc(-x / sqrt 2): accurate in the far left tail, where
// 0.5 (1 + erf) cancels (kernels/cpu/vmath.h makes the same choice).
COHORT_HD float normal_cdf(float x) {
  return 0.5f * erfcf(-x * 0.70710678118654752f);
}

// Exact GELU, x Phi(x) (torch.nn.GELU()), and its derivative Phi(x) + x phi(x).
COHORT_HD float gelu(float x) {
  return x * normal_cdf(x);
}
COHORT_HD float gelu_grad(float x) {
  const float phi = 0.39894228040143268f * expf(-0.5f * x * x);
  return normal_cdf(x) + x * phi;
}

enum class Unary : uint8_t { kRelu, kGelu, kTanh, kSigmoid, kExp, kLog, kSqrt };  // cpu::UnaryOp

COHORT_HD float apply_unary(Unary op, float x) {
  switch (op) {
    case Unary::kRelu:
      return x > 0.f ? x : 0.f;
    case Unary::kGelu:
      return gelu(x);
    case Unary::kTanh:
      return tanhf(x);
    case Unary::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case Unary::kExp:
      return expf(x);
    case Unary::kLog:
      return logf(x);
    default:
      return sqrtf(x);
  }
}

// ---- row statistics that combine in any order ------------------------------------------------

// Softmax over a row read in pieces: the running maximum and the sum of exp(x - max). Two
// pieces combine exactly (up to rounding), so threads and warps each keep one and merge them
// in a tree (the "online softmax" of flash attention). An empty piece is {-inf, 0}.
struct SoftmaxState {
  float max = -INFINITY;
  float sum = 0.f;
};

COHORT_HD SoftmaxState softmax_add(SoftmaxState s, float x) {
  // exp(-inf - max) = 0 adds nothing; skipping it keeps a piece of only masked (-inf) entries
  // empty instead of {-inf, exp(-inf + inf) = NaN}.
  if (x == -INFINITY) return s;
  if (x > s.max) {
    s.sum = s.sum * expf(s.max - x) + 1.f;  // exp(-inf) = 0 for the first element
    s.max = x;
  } else {
    s.sum += expf(x - s.max);
  }
  return s;
}

// A piece that saw a NaN has sum NaN (and max -inf if the NaN came first): only {-inf, 0} is
// empty, so the NaN reaches the row's result, as in kernels/cpu.
COHORT_HD SoftmaxState softmax_merge(SoftmaxState a, SoftmaxState b) {
  if (b.max == -INFINITY && b.sum == 0.f) return a;
  if (a.max == -INFINITY && a.sum == 0.f) return b;
  const float m = a.max > b.max ? a.max : b.max;
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// log(sum exp(x)) of the row the state has seen.
COHORT_HD float softmax_log_sum(SoftmaxState s) {
  return s.max + logf(s.sum);
}

// Mean and squared deviations of a row read in pieces (Welford; Chan et al. to merge), for
// layer norm: a numerically stable variance whatever the split.
struct MeanVar {
  float count = 0.f, mean = 0.f, m2 = 0.f;
};

COHORT_HD MeanVar meanvar_add(MeanVar s, float x) {
  s.count += 1.f;
  const float d = x - s.mean;
  s.mean += d / s.count;
  s.m2 += d * (x - s.mean);
  return s;
}

COHORT_HD MeanVar meanvar_merge(MeanVar a, MeanVar b) {
  if (b.count == 0.f) return a;
  if (a.count == 0.f) return b;
  const float n = a.count + b.count;
  const float d = b.mean - a.mean;
  return {n, a.mean + d * (b.count / n), a.m2 + b.m2 + d * d * (a.count * b.count / n)};
}

// 1 / sqrt(biased variance + eps), as kernels/cpu's layer norm keeps it.
COHORT_HD float meanvar_rstd(MeanVar s, float eps) {
  return 1.f / sqrtf(s.m2 / s.count + eps);
}

// ---- per-element formulas of the row kernels ------------------------------------------------

// Cross entropy, one row: -log softmax(x)[t] from forward's stats (m = the row max, log_sum =
// log sum exp(x - m)) and the target's logit, in double as kernels/cpu adds it.
COHORT_HD double cross_entropy_row_loss(float m, float log_sum, float x_target) {
  return (double(m) - double(x_target)) + double(log_sum);
}

// d loss / d x for one logit: (softmax(x) - onehot(t)) * scale, shifted as kernels/cpu does.
COHORT_HD float cross_entropy_grad(float x, float m, float log_sum, bool is_target, float scale) {
  const float p = expf((x - m) - log_sum) * scale;
  return is_target ? p - scale : p;
}

// Layer norm's output for one element; w and b are null for "no weight" (1) and "no bias" (0).
COHORT_HD float layer_norm_output(float x, float mean, float rstd, const float* w, const float* b,
                                  int64_t i) {
  float v = (x - mean) * rstd;
  if (w) v *= w[i];
  if (b) v += b[i];
  return v;
}

// Layer norm's input gradient for one element, given gw = dy * weight (dy without a weight),
// m1 = mean(gw) and m2 = mean(gw * xhat) over the row.
COHORT_HD float layer_norm_dx(float gw, float x, float mean, float rstd, float m1, float m2) {
  return rstd * (gw - m1 - (x - mean) * rstd * m2);
}

// ---- optimizers: one element, the same float32 operations in the same order as optim/ --------

// optim/adamw.cc's scalars (kernels/cpu/optim.h): computed once per step in double, rounded to
// float.
using AdamScalars = cpu::AdamScalars;

COHORT_HD void adamw_element(float& p, float g, float& m, float& v, const AdamScalars& s) {
  const float mi = m + s.one_minus_b1 * (g - m);
  const float vi = v * s.b2 + s.one_minus_b2 * (g * g);
  m = mi;
  v = vi;
  const float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
  p = p * s.decay + s.neg_step_size * (mi / denom);
}

// ---- matmul epilogue and fused optimizers (matmul.cu, optim.cu) ------------------------------

// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): what cuBLASLt's
// GELU epilogue computes (torch's gelu(approximate="tanh")), not cohort's exact gelu above.
COHORT_HD float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(inner));
}

// optim/adamw.cc's scalars for step t (counted from 1), in double and rounded once to float.
// Host only: the kernels take the result as an argument.
inline AdamScalars adamw_scalars(double lr, double beta1, double beta2, double eps,
                                 double weight_decay, int64_t t) {
  AdamScalars s{};
  s.decay = float(1.0 - lr * weight_decay);
  s.one_minus_b1 = float(1.0 - beta1);
  s.b2 = float(beta2);
  s.one_minus_b2 = float(1.0 - beta2);
  s.bc2_sqrt = float(std::sqrt(1.0 - std::pow(beta2, double(t))));
  s.eps = float(eps);
  s.neg_step_size = float(-lr / (1.0 - std::pow(beta1, double(t))));
  return s;
}

// optim/sgd.cc's scalars (kernels/cpu/optim.h), rounded to float as it rounds them.
using SgdScalars = cpu::SgdScalars;

inline SgdScalars sgd_scalars(double lr, double momentum, double dampening, double weight_decay) {
  return {float(lr), float(weight_decay), float(momentum), float(1.0 - dampening)};
}

// Which of optim/sgd.cc's three loops a step runs: no momentum; a parameter's first momentum
// step (the buffer starts as the gradient); every later one.
using SgdStep = cpu::SgdPhase;

// One SGD element, the float32 operations of optim/sgd.cc in its order; `buf` is the momentum
// buffer (untouched by kPlain).
COHORT_HD void sgd_element(float& p, float g, float& buf, const SgdScalars& s, SgdStep step,
                           bool nesterov) {
  const float d = g + s.wd * p;
  if (step == SgdStep::kPlain) {
    p = p + (-s.lr) * d;
    return;
  }
  const float b = step == SgdStep::kFirst ? d : buf * s.momentum + s.one_minus_dampening * d;
  buf = b;
  p = p + (-s.lr) * (nesterov ? d + s.momentum * b : b);
}

// ---- derivatives of the unary ops from their saved input or output (kernels/cpu) -----------

// What a unary backward reads: the forward output y (tanh, sigmoid, sqrt) or input x (pow).
enum class UnaryGrad : uint8_t { kTanh, kSigmoid, kSqrt };

// dx = g * f'(.), in kernels/cpu/elementwise.cc's float operations.
COHORT_HD float unary_grad(UnaryGrad op, float y, float g) {
  switch (op) {
    case UnaryGrad::kTanh:
      return g * (1.f - y * y);
    case UnaryGrad::kSigmoid:
      return g * y * (1.f - y);
    default:
      return g * 0.5f / y;
  }
}

// x^p, with kernels/cpu's exact cases for squares and square roots.
COHORT_HD float pow_value(float x, float p) {
  return p == 2.f ? x * x : (p == 0.5f ? sqrtf(x) : powf(x, p));
}

COHORT_HD float pow_grad(float x, float p, float g) {
  return p == 2.f ? g * 2.f * x : g * p * powf(x, p - 1.f);
}

}  // namespace cohort::cuda::math
