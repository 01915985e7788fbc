#pragma once
// Eight-lane float math (GCC vector extensions) for the hot loops of elementwise, softmax and
// cross-entropy kernels: exp, tanh, the normal CDF, and lane-wise max/sum reductions.
//
// Why explicit vectors: without -ffast-math (which we do not use: it breaks NaN handling),
// libm's expf is a scalar call, GCC will not vectorise a float sum or max reduction, and under
// the default -ftrapping-math it refuses to if-convert a clamp followed by arithmetic. Written
// on f32x8, the code is one AVX2 register per op in the x86-64-v3 clone of a COHORT_SIMD_CLONES
// function and two SSE registers in the baseline clone. Helpers are always_inline so that they
// are compiled for the clone that calls them and never pass vectors across an ABI boundary.
#include <cstdint>
#include <cstring>

// The helpers below take and return vectors, which would change the calling convention
// between the AVX2 and baseline clones; they are always inlined, so no call ever passes one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));

#define COHORT_VINLINE [[gnu::always_inline]] inline

COHORT_VINLINE f32x8 splat8(float s) {
  return f32x8{} + s;
}
COHORT_VINLINE f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
COHORT_VINLINE void store8(float* p, const f32x8& v) {
  std::memcpy(p, &v, sizeof v);
}
// The first n < 8 elements of p, the other lanes set to `fill`. Lane by lane rather than
// memcpy: a variable-length memcpy is a library call, which dominates short rows (softmax
// over 10 classes).
COHORT_VINLINE f32x8 load8_partial(const float* p, int64_t n, float fill) {
  f32x8 v = splat8(fill);
  for (int64_t k = 0; k < n; ++k) v[k] = p[k];
  return v;
}
COHORT_VINLINE void store8_partial(float* p, const f32x8& v, int64_t n) {
  for (int64_t k = 0; k < n; ++k) p[k] = v[k];
}
// Lane-wise max that keeps a NaN from either side (so a NaN row stays NaN, as in torch).
COHORT_VINLINE f32x8 max8(const f32x8& a, const f32x8& b) {
  return (a > b || a != a) ? a : b;
}
// Horizontal reductions in a fixed lane order (deterministic).
COHORT_VINLINE float hsum8(const f32x8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}
COHORT_VINLINE float hmax8(const f32x8& v) {
  float m = v[0];
  for (int k = 1; k < 8; ++k) m = (v[k] > m || v[k] != v[k]) ? v[k] : m;
  return m;
}

// exp(x) within ~1 ulp of libm on [-87, 88]; overflows to inf, underflows through the denormals
// to 0, NaN stays NaN. Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial in r.
COHORT_VINLINE f32x8 vexp8(const f32x8& x_in) {
  f32x8 x = x_in < -104.0f ? splat8(-104.0f) : x_in;
  x = x > 89.0f ? splat8(89.0f) : x;
  // Round x / ln2 to nearest with the 1.5 * 2^23 trick (no floor call).
  const float kMagic = 12582912.0f;
  f32x8 n = (x * 1.44269504088896341f + kMagic) - kMagic;
  f32x8 r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  f32x8 p = splat8(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n as two factors so that n in [-150, 128] never leaves the normal exponent range.
  i32x8 ni = __builtin_convertvector(n, i32x8);
  i32x8 n1 = ni >> 1;
  i32x8 n2 = ni - n1;
  f32x8 s1 = (f32x8)((n1 + 127) << 23);
  f32x8 s2 = (f32x8)((n2 + 127) << 23);
  return p * s1 * s2;
}

// The standard normal CDF Phi(x) = 0.5 erfc(-x / sqrt 2), accurate to ~1e-6 relative even in
// the far left tail (so GELU of a very negative input stays accurate, unlike 0.5 (1 + erf)).
// erfc(|z|) = t exp(-z^2 + P(t)), t = 1 / (1 + |z|/2): the Chebyshev fit of Numerical Recipes
// (fractional error < 1.2e-7); erfc(-|z|) = 2 - erfc(|z|).
COHORT_VINLINE f32x8 vphi8(const f32x8& x) {
  f32x8 z = x * -0.70710678118654752f;
  f32x8 a = z < 0.0f ? -z : z;
  f32x8 t = 1.0f / (1.0f + 0.5f * a);
  f32x8 p = splat8(0.17087277f);
  p = p * t + -0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t + -1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t + -0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t + -1.26551223f;
  f32x8 e = t * vexp8(p - a * a);
  return 0.5f * (z >= 0.0f ? e : 2.0f - e);
}

// tanh(x), Cephes tanhf (relative error ~1.5e-7): an odd polynomial for |x| < 0.625, where
// the exp form would cancel, else sign(x) (1 - 2 / (exp(2|x|) + 1)); both lanes computed and
// blended. exp overflowing to inf gives exactly +-1.
COHORT_VINLINE f32x8 vtanh8(const f32x8& x) {
  const f32x8 a = x < 0.0f ? -x : x;
  const f32x8 z = x * x;
  f32x8 p = splat8(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const f32x8 small = p * z * x + x;
  f32x8 big = 1.0f - 2.0f / (vexp8(2.0f * a) + 1.0f);
  big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : big;
}

// out[i] = F::f(x[i]) for i < n, eight lanes at a time; F::f maps f32x8 -> f32x8 and must be
// COHORT_VINLINE (a functor type rather than a lambda, so that it is always inlined).
template <typename F>
COHORT_VINLINE void map8(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, F::f(load8(x + i)));
  if (i < n) store8_partial(out + i, F::f(load8_partial(x + i, n - i, 0.0f)), n - i);
}
// out[i] = F::f(x[i], g[i]) for i < n.
template <typename F>
COHORT_VINLINE void map8(const float* x, const float* g, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, F::f(load8(x + i), load8(g + i)));
  if (i < n) {
    f32x8 r = F::f(load8_partial(x + i, n - i, 0.0f), load8_partial(g + i, n - i, 0.0f));
    store8_partial(out + i, r, n - i);
  }
}

}  // namespace cohort::cpu

#pragma GCC diagnostic pop
