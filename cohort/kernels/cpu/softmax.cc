#include "cohort/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"
#include "cohort/kernels/cpu/vmath.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // f32x8 helpers are always inlined (vmath.h)

namespace cohort::cpu {
namespace {

constexpr int64_t kSoftmaxGrain = 1 << 15;  // elements per parallel chunk

COHORT_VINLINE float row_max(const float* x, int64_t n) {
  f32x8 m = splat8(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = max8(m, load8(x + i));
  if (i < n) m = max8(m, load8_partial(x + i, n - i, -__builtin_inff()));
  return hmax8(m);
}

// sum_i exp(x[i] - m); also stores the exponentials in y when y is not null.
COHORT_VINLINE float row_exp_sum(const float* x, int64_t n, float m, float* y) {
  f32x8 s{};
  const f32x8 mv = splat8(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f32x8 e = vexp8(load8(x + i) - mv);
    if (y) store8(y + i, e);
    s += e;
  }
  if (i < n) {
    // Padding lanes hold -inf, whose exp is 0.
    f32x8 e = vexp8(load8_partial(x + i, n - i, -__builtin_inff()) - mv);
    if (y) store8_partial(y + i, e, n - i);
    s += e;
  }
  return hsum8(s);
}

COHORT_VINLINE float row_dot(const float* a, const float* b, int64_t n) {
  f32x8 s{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s += load8(a + i) * load8(b + i);
  if (i < n) s += load8_partial(a + i, n - i, 0.0f) * load8_partial(b + i, n - i, 0.0f);
  return hsum8(s);
}

COHORT_SIMD_CLONES void softmax_loop(const float* x, int64_t rows, int64_t c, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    const float m = row_max(xr, c);
    const float inv = 1.0f / row_exp_sum(xr, c, m, yr);
    for (int64_t i = 0; i < c; ++i) yr[i] *= inv;
  }
}

COHORT_SIMD_CLONES void log_softmax_loop(const float* x, int64_t rows, int64_t c, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    const float m = row_max(xr, c);
    // (x - m) - log(s): exact shift first, so large logits keep full precision.
    const float ls = std::log(row_exp_sum(xr, c, m, nullptr));
    for (int64_t i = 0; i < c; ++i) yr[i] = (xr[i] - m) - ls;
  }
}

COHORT_SIMD_CLONES void softmax_backward_loop(const float* y, const float* g, int64_t rows,
                                              int64_t c, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * c;
    const float* gr = g + r * c;
    float* dr = dx + r * c;
    const float dot = row_dot(gr, yr, c);
    for (int64_t i = 0; i < c; ++i) dr[i] = yr[i] * (gr[i] - dot);
  }
}

COHORT_SIMD_CLONES void log_softmax_backward_loop(const float* y, const float* g, int64_t rows,
                                                  int64_t c, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * c;
    const float* gr = g + r * c;
    float* dr = dx + r * c;
    f32x8 s{};
    int64_t i = 0;
    for (; i + 8 <= c; i += 8) s += load8(gr + i);
    if (i < c) s += load8_partial(gr + i, c - i, 0.0f);
    const f32x8 sum = splat8(hsum8(s));
    for (i = 0; i + 8 <= c; i += 8) store8(dr + i, load8(gr + i) - vexp8(load8(yr + i)) * sum);
    if (i < c) {
      f32x8 d =
          load8_partial(gr + i, c - i, 0.0f) - vexp8(load8_partial(yr + i, c - i, 0.0f)) * sum;
      store8_partial(dr + i, d, c - i);
    }
  }
}

// stats [rows, 2] = (row max m, log sum exp(x - m)).
COHORT_SIMD_CLONES void stats_loop(const float* x, int64_t rows, int64_t c, float* stats) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    const float m = row_max(xr, c);
    stats[2 * r] = m;
    stats[2 * r + 1] = std::log(row_exp_sum(xr, c, m, nullptr));
  }
}

COHORT_SIMD_CLONES void cross_entropy_backward_loop(const float* x, const int64_t* t,
                                                    const float* stats, int64_t rows, int64_t c,
                                                    float scale, float* dx) {
  const f32x8 sv = splat8(scale);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* dr = dx + r * c;
    const f32x8 m = splat8(stats[2 * r]), ls = splat8(stats[2 * r + 1]);
    int64_t i = 0;
    for (; i + 8 <= c; i += 8) store8(dr + i, vexp8((load8(xr + i) - m) - ls) * sv);
    if (i < c) {
      f32x8 p = vexp8((load8_partial(xr + i, c - i, 0.0f) - m) - ls);
      store8_partial(dr + i, p * sv, c - i);
    }
    dr[t[r]] -= scale;
  }
}

// Runs fn(lo, hi) over row ranges of ~kSoftmaxGrain elements.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t cols, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, kSoftmaxGrain / std::max<int64_t>(1, cols));
  if (rows <= grain) {
    if (rows > 0) fn(int64_t(0), rows);
    return;
  }
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) { fn(lo, hi); });
}

}  // namespace

void softmax_rows(const float* x, int64_t rows, int64_t cols, float* y) {
  parallel_rows(rows, cols, [&](int64_t lo, int64_t hi) {
    softmax_loop(x + lo * cols, hi - lo, cols, y + lo * cols);
  });
}

void log_softmax_rows(const float* x, int64_t rows, int64_t cols, float* y) {
  parallel_rows(rows, cols, [&](int64_t lo, int64_t hi) {
    log_softmax_loop(x + lo * cols, hi - lo, cols, y + lo * cols);
  });
}

void softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols, float* dx) {
  parallel_rows(rows, cols, [&](int64_t lo, int64_t hi) {
    softmax_backward_loop(y + lo * cols, g + lo * cols, hi - lo, cols, dx + lo * cols);
  });
}

void log_softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols,
                               float* dx) {
  parallel_rows(rows, cols, [&](int64_t lo, int64_t hi) {
    log_softmax_backward_loop(y + lo * cols, g + lo * cols, hi - lo, cols, dx + lo * cols);
  });
}

double cross_entropy_forward(const float* logits, const int64_t* targets, int64_t n, int64_t c,
                             float* stats) {
  parallel_rows(n, c, [&](int64_t lo, int64_t hi) {
    stats_loop(logits + lo * c, hi - lo, c, stats + 2 * lo);
  });
  double total = 0;
  for (int64_t r = 0; r < n; ++r)
    total += (double(stats[2 * r]) - double(logits[r * c + targets[r]])) + double(stats[2 * r + 1]);
  return total;
}

void cross_entropy_backward(const float* logits, const int64_t* targets, const float* stats,
                            int64_t n, int64_t c, float scale, float* dx) {
  parallel_rows(n, c, [&](int64_t lo, int64_t hi) {
    cross_entropy_backward_loop(logits + lo * c, targets + lo, stats + 2 * lo, hi - lo, c, scale,
                                dx + lo * c);
  });
}

}  // namespace cohort::cpu
