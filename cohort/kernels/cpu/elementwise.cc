#include "cohort/kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"
#include "cohort/kernels/cpu/vmath.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // f32x8 helpers are always inlined (vmath.h)

namespace cohort::cpu {
namespace {

struct AddOp {
  static float f(float a, float b) { return a + b; }
};
struct SubOp {
  static float f(float a, float b) { return a - b; }
};
struct MulOp {
  static float f(float a, float b) { return a * b; }
};
struct DivOp {
  static float f(float a, float b) { return a / b; }
};

// The four inner-loop shapes of binary_2d. Each is its own clone so that the common ones
// vectorise; kStrided is the fallback for transposed or sliced inputs.
enum class Inner { kVV, kVS, kSV, kStrided };

// out [rows, n] = a op b; rows advance by a_row / b_row, the inner loop by a_col / b_col.
template <typename Op, Inner kInner>
COHORT_SIMD_CLONES void binary_loop(int64_t rows, int64_t n, const float* __restrict a,
                                    int64_t a_row, int64_t a_col, const float* __restrict b,
                                    int64_t b_row, int64_t b_col, float* __restrict out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pa = a + r * a_row;
    const float* pb = b + r * b_row;
    float* po = out + r * n;
    if constexpr (kInner == Inner::kVV) {
      for (int64_t i = 0; i < n; ++i) po[i] = Op::f(pa[i], pb[i]);
    } else if constexpr (kInner == Inner::kVS) {
      const float s = pb[0];
      for (int64_t i = 0; i < n; ++i) po[i] = Op::f(pa[i], s);
    } else if constexpr (kInner == Inner::kSV) {
      const float s = pa[0];
      for (int64_t i = 0; i < n; ++i) po[i] = Op::f(s, pb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = Op::f(pa[i * a_col], pb[i * b_col]);
    }
  }
}

using BinaryLoopFn = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                              int64_t, int64_t, float*);

template <typename Op>
BinaryLoopFn pick_inner(int64_t a_col, int64_t b_col) {
  if (a_col == 1 && b_col == 1) return binary_loop<Op, Inner::kVV>;
  if (a_col == 1 && b_col == 0) return binary_loop<Op, Inner::kVS>;
  if (a_col == 0 && b_col == 1) return binary_loop<Op, Inner::kSV>;
  return binary_loop<Op, Inner::kStrided>;
}

BinaryLoopFn pick_binary(BinaryOp op, int64_t a_col, int64_t b_col) {
  switch (op) {
    case BinaryOp::kAdd:
      return pick_inner<AddOp>(a_col, b_col);
    case BinaryOp::kSub:
      return pick_inner<SubOp>(a_col, b_col);
    case BinaryOp::kMul:
      return pick_inner<MulOp>(a_col, b_col);
    case BinaryOp::kDiv:
      return pick_inner<DivOp>(a_col, b_col);
  }
  return nullptr;
}

// Splits [0, n) into chunks of kElementwiseGrain and runs fn(lo, hi) on each.
template <typename Fn>
void parallel_elements(int64_t n, Fn&& fn) {
  if (n <= kElementwiseGrain) {
    fn(int64_t(0), n);
    return;
  }
  parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) { fn(lo, hi); });
}

}  // namespace

void binary_2d(BinaryOp op, int64_t rows, int64_t n, const float* a, int64_t a_row, int64_t a_col,
               const float* b, int64_t b_row, int64_t b_col, float* out) {
  if (rows <= 0 || n <= 0) return;
  BinaryLoopFn fn = pick_binary(op, a_col, b_col);
  if (n >= kElementwiseGrain) {
    // Long rows: split each row, so that one huge row still uses every thread.
    for (int64_t r = 0; r < rows; ++r) {
      const float* pa = a + r * a_row;
      const float* pb = b + r * b_row;
      float* po = out + r * n;
      parallel_elements(n, [&](int64_t lo, int64_t hi) {
        fn(1, hi - lo, pa + lo * a_col, 0, a_col, pb + lo * b_col, 0, b_col, po + lo);
      });
    }
    return;
  }
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / n);
  if (rows <= grain) {
    fn(rows, n, a, a_row, a_col, b, b_row, b_col, out);
    return;
  }
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    fn(hi - lo, n, a + lo * a_row, a_row, a_col, b + lo * b_row, b_row, b_col, out + lo * n);
  });
}

namespace {

COHORT_SIMD_CLONES void affine_loop(const float* __restrict x, float scale, float shift,
                                    float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale + shift;
}

struct Relu {
  static float f(float x) { return x < 0.0f ? 0.0f : x; }  // NaN passes through, as torch
};
struct Log {
  static float f(float x) { return std::log(x); }
};
struct Sqrt {
  static float f(float x) { return std::sqrt(x); }
};
// These need exp: written on f32x8 (vmath.h) to vectorise.
struct Tanh {
  COHORT_VINLINE static f32x8 f(const f32x8& x) { return vtanh8(x); }
};
struct Gelu {
  COHORT_VINLINE static f32x8 f(const f32x8& x) { return x * vphi8(x); }
};
struct Sigmoid {
  COHORT_VINLINE static f32x8 f(const f32x8& x) { return 1.0f / (1.0f + vexp8(-x)); }
};
struct Exp {
  COHORT_VINLINE static f32x8 f(const f32x8& x) { return vexp8(x); }
};

template <typename F>
COHORT_SIMD_CLONES void unary_loop(const float* __restrict x, float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F::f(x[i]);
}
template <typename F>
COHORT_SIMD_CLONES void unary_loop8(const float* x, float* out, int64_t n) {
  map8<F>(x, out, n);
}

using UnaryLoopFn = void (*)(const float*, float*, int64_t);

UnaryLoopFn pick_unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::kRelu:
      return unary_loop<Relu>;
    case UnaryOp::kGelu:
      return unary_loop8<Gelu>;
    case UnaryOp::kTanh:
      return unary_loop8<Tanh>;
    case UnaryOp::kSigmoid:
      return unary_loop8<Sigmoid>;
    case UnaryOp::kExp:
      return unary_loop8<Exp>;
    case UnaryOp::kLog:
      return unary_loop<Log>;
    case UnaryOp::kSqrt:
      return unary_loop<Sqrt>;
  }
  return nullptr;
}

void pow_loop(const float* x, float p, float* out, int64_t n) {
  if (p == 2.0f) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i];
  } else if (p == 0.5f) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::pow(x[i], p);
  }
}

COHORT_SIMD_CLONES void relu_backward_loop(const float* __restrict x, const float* __restrict g,
                                           float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? g[i] : 0.0f;
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
struct GeluGrad {
  COHORT_VINLINE static f32x8 f(const f32x8& x, const f32x8& g) {
    return g * (vphi8(x) + x * 0.39894228040143267794f * vexp8(-0.5f * x * x));
  }
};
COHORT_SIMD_CLONES void gelu_backward_loop(const float* x, const float* g, float* dx, int64_t n) {
  map8<GeluGrad>(x, g, dx, n);
}

COHORT_SIMD_CLONES void tanh_backward_loop(const float* __restrict y, const float* __restrict g,
                                           float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * (1.0f - y[i] * y[i]);
}

COHORT_SIMD_CLONES void sigmoid_backward_loop(const float* __restrict y, const float* __restrict g,
                                              float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * y[i] * (1.0f - y[i]);
}

COHORT_SIMD_CLONES void sqrt_backward_loop(const float* __restrict y, const float* __restrict g,
                                           float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * 0.5f / y[i];
}

void pow_backward_loop(const float* x, float p, const float* g, float* dx, int64_t n) {
  if (p == 2.0f) {
    for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * 2.0f * x[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * p * std::pow(x[i], p - 1.0f);
  }
}

// Runs a (x, g, dx) backward loop over chunks.
template <typename Loop>
void backward_chunks(Loop loop, const float* x, const float* g, float* dx, int64_t n) {
  parallel_elements(n, [&](int64_t lo, int64_t hi) { loop(x + lo, g + lo, dx + lo, hi - lo); });
}

}  // namespace

void affine(const float* x, float scale, float shift, float* out, int64_t n) {
  parallel_elements(
      n, [&](int64_t lo, int64_t hi) { affine_loop(x + lo, scale, shift, out + lo, hi - lo); });
}

void unary(UnaryOp op, const float* x, float* out, int64_t n) {
  UnaryLoopFn fn = pick_unary(op);
  parallel_elements(n, [&](int64_t lo, int64_t hi) { fn(x + lo, out + lo, hi - lo); });
}

void pow_scalar(const float* x, float p, float* out, int64_t n) {
  parallel_elements(n, [&](int64_t lo, int64_t hi) { pow_loop(x + lo, p, out + lo, hi - lo); });
}

void relu_backward(const float* x, const float* g, float* dx, int64_t n) {
  backward_chunks(relu_backward_loop, x, g, dx, n);
}
void gelu_backward(const float* x, const float* g, float* dx, int64_t n) {
  backward_chunks(gelu_backward_loop, x, g, dx, n);
}
void tanh_backward(const float* y, const float* g, float* dx, int64_t n) {
  backward_chunks(tanh_backward_loop, y, g, dx, n);
}
void sigmoid_backward(const float* y, const float* g, float* dx, int64_t n) {
  backward_chunks(sigmoid_backward_loop, y, g, dx, n);
}
void sqrt_backward(const float* y, const float* g, float* dx, int64_t n) {
  backward_chunks(sqrt_backward_loop, y, g, dx, n);
}
void pow_scalar_backward(const float* x, float p, const float* g, float* dx, int64_t n) {
  parallel_elements(
      n, [&](int64_t lo, int64_t hi) { pow_backward_loop(x + lo, p, g + lo, dx + lo, hi - lo); });
}

}  // namespace cohort::cpu
