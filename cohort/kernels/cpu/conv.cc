#include "cohort/kernels/cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {
namespace {

// Samples are grouped only when one sample's output is too narrow for an efficient gemm (fewer
// than kMinGemmCols columns, e.g. late layers with small maps); measured on the CNN benchmark,
// grouping wider outputs only adds the gather/scatter copies. The group's im2col buffer stays
// under kColBudget floats so it is still in L2 when the gemm streams it.
constexpr int64_t kMinGemmCols = 128;
constexpr int64_t kColBudget = int64_t(1) << 18;

int64_t ceil_div_pos(int64_t a, int64_t b) {
  return a <= 0 ? 0 : (a + b - 1) / b;
}

// How the batch is cut: `chunks` ranges of `per` samples (one per thread), each processed in
// groups of `group` samples.
struct Plan {
  int64_t chunks, per, group, len;  // len = OH * OW
};

Plan make_plan(const Conv2dShape& s) {
  Plan p;
  p.len = s.oh() * s.ow();
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(num_threads(), s.n));
  p.per = std::max<int64_t>(1, (s.n + threads - 1) / threads);
  p.chunks = std::max<int64_t>(1, (s.n + p.per - 1) / p.per);  // none left empty
  const int64_t per_sample = std::max<int64_t>(1, s.patch() * p.len);
  const int64_t want = kMinGemmCols / std::max<int64_t>(1, p.len);
  p.group = std::clamp<int64_t>(std::min(want, kColBudget / per_sample), 1, p.per);
  return p;
}

using GemmFn = void (*)(int64_t, int64_t, int64_t, float, MatRef, MatRef, float, float*, int64_t);

// Runs body(chunk, gemm) for every chunk: in parallel with single-threaded gemms when there are
// several, else inline with gemms that may use all threads.
template <typename Body>
void for_each_chunk(const Plan& p, Body&& body) {
  if (p.chunks == 1) {
    body(int64_t(0), GemmFn(&sgemm));
    return;
  }
  SerialBlasScope serial;
  parallel_for(0, p.chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) body(t, GemmFn(&sgemm_unsynced));
  });
}

COHORT_SIMD_CLONES void add_bias_copy(float* __restrict dst, const float* __restrict src, float b,
                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] + b;
}

COHORT_SIMD_CLONES void add_to(float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

float row_sum(const float* p, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  float s = 0;
  for (; i < n; ++i) s += p[i];
  for (int j = 0; j < 8; ++j) s += acc[j];
  return s;
}

}  // namespace

void im2col(const Conv2dShape& s, const float* x, float* col, int64_t ldc) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t c = 0; c < s.c; ++c) {
    const float* xc = x + c * s.h * s.w;
    for (int64_t ki = 0; ki < s.kh; ++ki) {
      for (int64_t kj = 0; kj < s.kw; ++kj) {
        float* row = col + ((c * s.kh + ki) * s.kw + kj) * ldc;
        // Output columns whose input column ix = ox * stride - pad + kj lies inside [0, W).
        const int64_t lo = std::min(ow, ceil_div_pos(s.pad - kj, s.stride));
        const int64_t hi = std::clamp(ceil_div_pos(s.w + s.pad - kj, s.stride), lo, ow);
        for (int64_t oy = 0; oy < oh; ++oy) {
          float* out = row + oy * ow;
          const int64_t iy = oy * s.stride - s.pad + ki;
          if (iy < 0 || iy >= s.h) {
            std::memset(out, 0, size_t(ow) * sizeof(float));
            continue;
          }
          std::fill(out, out + lo, 0.0f);
          const float* src = xc + iy * s.w + (lo * s.stride - s.pad + kj);
          if (s.stride == 1) {
            std::memcpy(out + lo, src, size_t(hi - lo) * sizeof(float));
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) out[ox] = src[(ox - lo) * s.stride];
          }
          std::fill(out + hi, out + ow, 0.0f);
        }
      }
    }
  }
}

void col2im(const Conv2dShape& s, const float* col, int64_t ldc, float* dx) {
  const int64_t oh = s.oh(), ow = s.ow();
  for (int64_t c = 0; c < s.c; ++c) {
    float* dc = dx + c * s.h * s.w;
    for (int64_t ki = 0; ki < s.kh; ++ki) {
      for (int64_t kj = 0; kj < s.kw; ++kj) {
        const float* row = col + ((c * s.kh + ki) * s.kw + kj) * ldc;
        const int64_t lo = std::min(ow, ceil_div_pos(s.pad - kj, s.stride));
        const int64_t hi = std::clamp(ceil_div_pos(s.w + s.pad - kj, s.stride), lo, ow);
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * s.stride - s.pad + ki;
          if (iy < 0 || iy >= s.h) continue;
          const float* in = row + oy * ow;
          float* dst = dc + iy * s.w + (lo * s.stride - s.pad + kj);
          if (s.stride == 1) {
            add_to(dst, in + lo, hi - lo);
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) dst[(ox - lo) * s.stride] += in[ox];
          }
        }
      }
    }
  }
}

int64_t conv2d_forward_workspace(const Conv2dShape& s) {
  Plan p = make_plan(s);
  int64_t cols = p.group * p.len;
  return p.chunks * (s.patch() * cols + (p.group > 1 ? s.o * cols : 0));
}

// Per group of g samples: y_g [O, g*L] = w [O, patch] x col_g [patch, g*L]. A group of one
// writes straight into y (bias pre-filled, beta = 1); larger groups go through a buffer and are
// split back into y's [N, O, L] layout, adding the bias on the way.
void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias,
                    float* y, float* workspace) {
  const Plan p = make_plan(s);
  const int64_t patch = s.patch(), L = p.len, x_step = s.c * s.h * s.w, y_step = s.o * L;
  const int64_t ws_step = conv2d_forward_workspace(s) / p.chunks;
  for_each_chunk(p, [&](int64_t t, GemmFn gemm) {
    float* col = workspace + t * ws_step;
    float* buf = col + patch * p.group * L;
    const int64_t end = std::min(s.n, (t + 1) * p.per);
    for (int64_t n0 = t * p.per; n0 < end; n0 += p.group) {
      const int64_t g = std::min(p.group, end - n0), ld = g * L;
      for (int64_t i = 0; i < g; ++i) im2col(s, x + (n0 + i) * x_step, col + i * L, ld);
      if (g == 1) {
        float* yn = y + n0 * y_step;
        if (bias) {
          for (int64_t o = 0; o < s.o; ++o) std::fill(yn + o * L, yn + (o + 1) * L, bias[o]);
        }
        gemm(s.o, L, patch, 1.0f, {w, patch}, {col, ld}, bias ? 1.0f : 0.0f, yn, L);
        continue;
      }
      gemm(s.o, ld, patch, 1.0f, {w, patch}, {col, ld}, 0.0f, buf, ld);
      for (int64_t i = 0; i < g; ++i)
        for (int64_t o = 0; o < s.o; ++o)
          add_bias_copy(y + (n0 + i) * y_step + o * L, buf + o * ld + i * L, bias ? bias[o] : 0, L);
    }
  });
}

namespace {
// Per chunk: col and dcol [patch, group*L], plus the gathered dy [O, group*L] when grouping.
int64_t backward_chunk_floats(const Conv2dShape& s, const Plan& p) {
  const int64_t cols = p.group * p.len;
  return 2 * s.patch() * cols + (p.group > 1 ? s.o * cols : 0);
}
}  // namespace

int64_t conv2d_backward_workspace(const Conv2dShape& s) {
  const Plan p = make_plan(s);
  return p.chunks * backward_chunk_floats(s, p) + (p.chunks - 1) * (s.o * s.patch() + s.o);
}

namespace {

struct BackwardCtx {
  const Conv2dShape& s;
  const Plan& p;
  const float *x, *w, *dy;
  Conv2dGrads grads;
};

// One chunk's samples: accumulates dw_part/db_part over its groups and writes its dx slices.
void backward_chunk(const BackwardCtx& cx, int64_t t, GemmFn gemm, float* scratch, float* dw_part,
                    float* db_part) {
  const Conv2dShape& s = cx.s;
  const int64_t patch = s.patch(), L = cx.p.len, x_step = s.c * s.h * s.w, y_step = s.o * L;
  float* col = scratch;
  float* dcol = col + patch * cx.p.group * L;
  float* dyg = dcol + patch * cx.p.group * L;
  const int64_t begin = t * cx.p.per, end = std::min(s.n, (t + 1) * cx.p.per);
  if (db_part) std::fill(db_part, db_part + s.o, 0.0f);
  for (int64_t n0 = begin; n0 < end; n0 += cx.p.group) {
    const int64_t g = std::min(cx.p.group, end - n0), ld = g * L;
    // dy for the group as one [O, g*L] matrix (a group of one is already laid out so).
    const float* d = cx.dy + n0 * y_step;
    if (g > 1) {
      for (int64_t i = 0; i < g; ++i)
        for (int64_t o = 0; o < s.o; ++o)
          std::memcpy(dyg + o * ld + i * L, d + i * y_step + o * L, size_t(L) * sizeof(float));
      d = dyg;
    }
    if (dw_part) {  // dw [O, patch] += dy_g [O, g*L] x col_g^T [g*L, patch]
      for (int64_t i = 0; i < g; ++i) im2col(s, cx.x + (n0 + i) * x_step, col + i * L, ld);
      gemm(s.o, patch, ld, 1.0f, {d, ld}, {col, ld, Trans::kYes}, n0 == begin ? 0.0f : 1.0f,
           dw_part, patch);
    }
    if (db_part) {
      for (int64_t o = 0; o < s.o; ++o) db_part[o] += row_sum(d + o * ld, ld);
    }
    if (cx.grads.dx) {  // dcol [patch, g*L] = w^T [patch, O] x dy_g [O, g*L], then col2im
      gemm(patch, ld, s.o, 1.0f, {cx.w, patch, Trans::kYes}, {d, ld}, 0.0f, dcol, ld);
      for (int64_t i = 0; i < g; ++i) {
        float* dxn = cx.grads.dx + (n0 + i) * x_step;
        std::memset(dxn, 0, size_t(x_step) * sizeof(float));
        col2im(s, dcol + i * L, ld, dxn);
      }
    }
  }
  // An empty batch has zero gradients.
  if (dw_part && begin >= end) std::fill(dw_part, dw_part + s.o * patch, 0.0f);
}

}  // namespace

void conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy,
                     const Conv2dGrads& grads, float* workspace) {
  const Plan p = make_plan(s);
  const int64_t wsize = s.o * s.patch(), per_chunk = backward_chunk_floats(s, p);
  // Partial weight/bias gradients of chunks 1.. live after the per-chunk scratch; chunk 0
  // writes into the outputs directly.
  float* partials = workspace + p.chunks * per_chunk;
  BackwardCtx cx{s, p, x, w, dy, grads};
  for_each_chunk(p, [&](int64_t t, GemmFn gemm) {
    float* dw_part = grads.dw ? (t == 0 ? grads.dw : partials + (t - 1) * (wsize + s.o)) : nullptr;
    float* db_part =
        grads.db ? (t == 0 ? grads.db : partials + (t - 1) * (wsize + s.o) + wsize) : nullptr;
    backward_chunk(cx, t, gemm, workspace + t * per_chunk, dw_part, db_part);
  });
  for (int64_t t = 1; t < p.chunks; ++t) {  // fixed order: same bits for a given thread count
    float* part = partials + (t - 1) * (wsize + s.o);
    if (grads.dw) add_to(grads.dw, part, wsize);
    if (grads.db) add_to(grads.db, part + wsize, s.o);
  }
}

namespace {

// One (n, c) plane, one output row at a time: the row starts as each window's first element,
// then every other window position updates the whole row with branch-free selects (vectorised;
// "is this the new maximum" on random data is a coin flip a branch would mispredict). Positions
// are visited in row-major order with a strict >, so the first maximum wins. kStride > 0 fixes
// the stride at compile time (strided loads the compiler can vectorise); 0 reads s.stride.
template <int32_t kStride>
[[gnu::always_inline]] inline void max_pool_plane(const Pool2dShape& s, const float* xp, float* yp,
                                                  int32_t* ap) {
  const int64_t oh = s.oh(), ow = s.ow();
  const int32_t st = kStride > 0 ? kStride : int32_t(s.stride);
  for (int64_t oy = 0; oy < oh; ++oy) {
    float* __restrict yr = yp + oy * ow;
    int32_t* __restrict ar = ap + oy * ow;
    const int32_t first = int32_t(oy * st * s.w);
    for (int32_t ox = 0; ox < int32_t(ow); ++ox) {
      yr[ox] = xp[first + ox * st];
      ar[ox] = first + ox * st;
    }
    for (int64_t i = 0; i < s.kernel; ++i) {
      for (int64_t j = (i == 0 ? 1 : 0); j < s.kernel; ++j) {
        const int32_t off = int32_t((oy * st + i) * s.w + j);
        for (int32_t ox = 0; ox < int32_t(ow); ++ox) {
          const float v = xp[off + ox * st], b = yr[ox];
          const bool take = v > b || (v != v && b == b);  // NaN wins, as in PyTorch
          yr[ox] = take ? v : b;
          ar[ox] = take ? off + ox * st : ar[ox];
        }
      }
    }
  }
}

COHORT_SIMD_CLONES void max_pool_planes_s2(const Pool2dShape& s, const float* x, float* y,
                                           int32_t* argmax, int64_t lo, int64_t hi) {
  const int64_t out_plane = s.oh() * s.ow(), in_plane = s.h * s.w;
  for (int64_t p = lo; p < hi; ++p)
    max_pool_plane<2>(s, x + p * in_plane, y + p * out_plane, argmax + p * out_plane);
}

COHORT_SIMD_CLONES void max_pool_planes(const Pool2dShape& s, const float* x, float* y,
                                        int32_t* argmax, int64_t lo, int64_t hi) {
  const int64_t out_plane = s.oh() * s.ow(), in_plane = s.h * s.w;
  for (int64_t p = lo; p < hi; ++p)
    max_pool_plane<0>(s, x + p * in_plane, y + p * out_plane, argmax + p * out_plane);
}

}  // namespace

void max_pool2d_forward(const Pool2dShape& s, const float* x, float* y, int32_t* argmax) {
  parallel_for(0, s.n * s.c, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, s.h * s.w)),
               [&](int64_t lo, int64_t hi) {
                 if (s.stride == 2) {
                   max_pool_planes_s2(s, x, y, argmax, lo, hi);
                 } else {
                   max_pool_planes(s, x, y, argmax, lo, hi);
                 }
               });
}

void max_pool2d_backward(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx) {
  const int64_t out_plane = s.oh() * s.ow(), in_plane = s.h * s.w, planes = s.n * s.c;
  parallel_for(0, planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in_plane)),
               [&](int64_t lo, int64_t hi) {
                 std::memset(dx + lo * in_plane, 0, size_t((hi - lo) * in_plane) * sizeof(float));
                 for (int64_t pl = lo; pl < hi; ++pl) {
                   float* dp = dx + pl * in_plane;
                   const float* gp = dy + pl * out_plane;
                   const int32_t* ap = argmax + pl * out_plane;
                   for (int64_t i = 0; i < out_plane; ++i) dp[ap[i]] += gp[i];
                 }
               });
}

}  // namespace cohort::cpu
