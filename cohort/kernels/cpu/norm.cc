#include "cohort/kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {
namespace {

// Rows per parallel_for chunk: about 16k elements, so small inputs stay on one thread.
int64_t row_grain(int64_t d) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
}

// Eight independent partial sums let the compiler vectorise a float reduction without
// -ffast-math (the summation order is fixed, so results are reproducible).
template <typename F>
inline float sum8(int64_t n, F f) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += f(i + j);
  float s = 0;
  for (; i < n; ++i) s += f(i);
  for (int j = 0; j < 8; ++j) s += acc[j];
  return s;
}

COHORT_SIMD_CLONES void forward_rows(const float* x, const float* weight, const float* bias,
                                     int64_t lo, int64_t hi, int64_t d, float eps, float* y,
                                     float* mean, float* rstd) {
  for (int64_t r = lo; r < hi; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float mu = sum8(d, [&](int64_t i) { return xr[i]; }) / float(d);
    const float var = sum8(d, [&](int64_t i) { return (xr[i] - mu) * (xr[i] - mu); }) / float(d);
    const float rs = 1.0f / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (weight && bias) {
      for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - mu) * rs * weight[i] + bias[i];
    } else {
      for (int64_t i = 0; i < d; ++i) {
        float v = (xr[i] - mu) * rs;
        if (weight) v *= weight[i];
        if (bias) v += bias[i];
        yr[i] = v;
      }
    }
  }
}

COHORT_SIMD_CLONES void dx_rows(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, int64_t lo, int64_t hi,
                                int64_t d, float* dx) {
  for (int64_t r = lo; r < hi; ++r) {
    const float *g = dy + r * d, *xr = x + r * d;
    const float mu = mean[r], rs = rstd[r];
    auto gw = [&](int64_t i) { return weight ? g[i] * weight[i] : g[i]; };
    const float m1 = sum8(d, gw) / float(d);
    const float m2 = sum8(d, [&](int64_t i) { return gw(i) * (xr[i] - mu) * rs; }) / float(d);
    float* out = dx + r * d;
    for (int64_t i = 0; i < d; ++i) out[i] = rs * (gw(i) - m1 - (xr[i] - mu) * rs * m2);
  }
}

// Columns [lo, hi) of dw and db, summed over rows in order (independent of the thread count).
COHORT_SIMD_CLONES void param_cols(const float* dy, const float* x, const float* mean,
                                   const float* rstd, int64_t rows, int64_t d, int64_t lo,
                                   int64_t hi, float* dw, float* db) {
  if (dw) std::fill(dw + lo, dw + hi, 0.0f);
  if (db) std::fill(db + lo, db + hi, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = dy + r * d, *xr = x + r * d;
    const float mu = mean[r], rs = rstd[r];
    if (dw)
      for (int64_t i = lo; i < hi; ++i) dw[i] += g[i] * (xr[i] - mu) * rs;
    if (db)
      for (int64_t i = lo; i < hi; ++i) db[i] += g[i];
  }
}

}  // namespace

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t d, float eps, float* y, float* mean, float* rstd) {
  parallel_for(0, rows, row_grain(d), [&](int64_t lo, int64_t hi) {
    forward_rows(x, weight, bias, lo, hi, d, eps, y, mean, rstd);
  });
}

void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t d, const LayerNormGrads& grads) {
  if (grads.dx) {
    parallel_for(0, rows, row_grain(d), [&](int64_t lo, int64_t hi) {
      dx_rows(dy, x, weight, mean, rstd, lo, hi, d, grads.dx);
    });
  }
  if (grads.dw || grads.db) {
    // Split by columns (each thread walks all rows for its columns): no partial sums to merge.
    parallel_for(0, d, std::max<int64_t>(16, 16384 / std::max<int64_t>(rows, 1)),
                 [&](int64_t lo, int64_t hi) {
                   param_cols(dy, x, mean, rstd, rows, d, lo, hi, grads.dw, grads.db);
                 });
  }
}

}  // namespace cohort::cpu
