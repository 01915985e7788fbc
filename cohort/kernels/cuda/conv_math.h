#pragma once
// conv2d and max_pool2d per-element index arithmetic (conv.cu; tests/cuda/conv_math_test.cc).
#include "cohort/kernels/cuda/device_math.h"

#include "cohort/kernels/cpu/conv.h"

namespace cohort::cuda::math {

// A Conv2dShape with its output size worked out once (the kernels cannot call oh() / ow()).
struct ConvGeom {
  int64_t c, h, w, kh, kw, stride, pad, oh, ow;
};
inline ConvGeom conv_geom(const cpu::Conv2dShape& s) {
  return {s.c, s.h, s.w, s.kh, s.kw, s.stride, s.pad, s.oh(), s.ow()};
}

// The input row (or column) that output position `o` reads at kernel offset `k`; -1 where that
// falls in the zero padding.
COHORT_HD int64_t conv_source(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t in_len) {
  const int64_t i = o * stride - pad + k;
  return i >= 0 && i < in_len ? i : -1;
}

// The inverse: the output position whose kernel offset `k` reads input position `i`, or -1 where
// none does (i + pad - k not a multiple of the stride, or past the output's ends).
COHORT_HD int64_t conv_target(int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t out_len) {
  const int64_t t = i + pad - k;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < out_len ? o : -1;
}

// Element (r, l) of one sample's im2col matrix [C*KH*KW, OH*OW] from x [C, H, W]: row
// r = (c * KH + ki) * KW + kj, column l = oy * OW + ox (cpu::im2col's layout).
COHORT_HD float im2col_value(const float* x, const ConvGeom& g, int64_t r, int64_t l) {
  const int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
  const int64_t iy = conv_source(l / g.ow, ki, g.stride, g.pad, g.h);
  const int64_t ix = conv_source(l % g.ow, kj, g.stride, g.pad, g.w);
  return iy < 0 || ix < 0 ? 0.f : x[(c * g.h + iy) * g.w + ix];
}

// cpu::col2im as a gather: dx (c, iy, ix) is the sum of the col elements that read it, one per
// kernel offset at most, added from 0 in (ki, kj) order: the order in which cpu::col2im's
// scatter reaches any one element, so the bits match it.
COHORT_HD float col2im_value(const float* col, int64_t ldc, const ConvGeom& g, int64_t c,
                             int64_t iy, int64_t ix) {
  float acc = 0.f;
  for (int64_t ki = 0; ki < g.kh; ++ki) {
    const int64_t oy = conv_target(iy, ki, g.stride, g.pad, g.oh);
    if (oy < 0) continue;
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      const int64_t ox = conv_target(ix, kj, g.stride, g.pad, g.ow);
      if (ox < 0) continue;
      acc += col[((c * g.kh + ki) * g.kw + kj) * ldc + oy * g.ow + ox];
    }
  }
  return acc;
}

// A Pool2dShape's plane geometry with the output size worked out once.
struct PoolGeom {
  int64_t h, w, kernel, stride, oh, ow;
};
inline PoolGeom pool_geom(const cpu::Pool2dShape& s) {
  return {s.h, s.w, s.kernel, s.stride, s.oh(), s.ow()};
}

// Output (oy, ox) of one plane xp [H, W]: the first maximum of its window in row-major order
// (strict >, a NaN wins over a number), as cpu::max_pool2d_forward; idx = h * W + w.
COHORT_HD void max_pool_window(const float* xp, const PoolGeom& g, int64_t oy, int64_t ox,
                               float& val, int32_t& idx) {
  const int64_t y0 = oy * g.stride, x0 = ox * g.stride;
  int32_t best_i = int32_t(y0 * g.w + x0);
  float best = xp[best_i];
  for (int64_t i = 0; i < g.kernel; ++i) {
    for (int64_t j = (i == 0 ? 1 : 0); j < g.kernel; ++j) {
      const int32_t at = int32_t((y0 + i) * g.w + x0 + j);
      const float v = xp[at];
      if (v > best || (v != v && best == best)) {
        best = v;
        best_i = at;
      }
    }
  }
  val = best;
  idx = best_i;
}

// Output positions [lo, hi) whose windows (kernel wide, `stride` apart) contain input position
// i: more than one where stride < kernel, none in the gaps where stride > kernel.
struct IndexRange {
  int64_t lo, hi;
};
COHORT_HD IndexRange pool_windows_containing(int64_t i, int64_t kernel, int64_t stride,
                                             int64_t out_len) {
  const int64_t lo = i < kernel ? 0 : (i - kernel) / stride + 1;  // ceil((i - kernel + 1) / s)
  int64_t hi = i / stride + 1;
  if (hi > out_len) hi = out_len;
  return {lo, hi < lo ? lo : hi};
}

// dx (iy, ix) of one plane: the sum of dy over the outputs whose argmax is this pixel, added
// from 0 in output order (oy, then ox): cpu::max_pool2d_backward's order, so the bits match.
COHORT_HD float max_pool_grad(const float* gp, const int32_t* ap, const PoolGeom& g, int64_t iy,
                              int64_t ix) {
  const IndexRange rows = pool_windows_containing(iy, g.kernel, g.stride, g.oh);
  const IndexRange cols = pool_windows_containing(ix, g.kernel, g.stride, g.ow);
  const int32_t self = int32_t(iy * g.w + ix);
  float acc = 0.f;
  for (int64_t oy = rows.lo; oy < rows.hi; ++oy)
    for (int64_t ox = cols.lo; ox < cols.hi; ++ox)
      if (ap[oy * g.ow + ox] == self) acc += gp[oy * g.ow + ox];
  return acc;
}

}  // namespace cohort::cuda::math
