#include "cohort/kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {
namespace {

// Eight partial sums: vectorisable without -ffast-math, and in a fixed order.
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int j = 0; j < 8; ++j) s += acc[j];
  return s;
}

inline void axpy(float* __restrict y, float a, const float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Row pointers of one (b, h) head.
struct Head {
  const float *q, *k, *v;
  int64_t qt, kt, vt;  // row strides
};

Head head_at(const AttnInputs& in, int64_t bh, int64_t heads) {
  const int64_t b = bh / heads, h = bh % heads;
  return {in.q + b * in.qs.b + h * in.qs.h,
          in.k + b * in.ks.b + h * in.ks.h,
          in.v + b * in.vs.b + h * in.vs.h,
          in.qs.t,
          in.ks.t,
          in.vs.t};
}

// Scratch rows for one thread: grows to the longest sequence seen, then is reused.
float* scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (int64_t(buf.size()) < n) buf.resize(size_t(n));
  return buf.data();
}

COHORT_SIMD_CLONES void forward_head(const Head& hd, int64_t T, int64_t dh, float scale, float* p,
                                     float* out, float* lse) {
  for (int64_t t = 0; t < T; ++t) {
    const float* qt = hd.q + t * hd.qt;
    float m = -INFINITY;
    for (int64_t j = 0; j <= t; ++j) {
      p[j] = scale * dot(qt, hd.k + j * hd.kt, dh);
      m = std::max(m, p[j]);
    }
    float l = 0;
    for (int64_t j = 0; j <= t; ++j) l += (p[j] = std::exp(p[j] - m));
    float* ot = out + t * dh;
    std::fill(ot, ot + dh, 0.0f);
    for (int64_t j = 0; j <= t; ++j) axpy(ot, p[j], hd.v + j * hd.vt, dh);
    const float inv = 1.0f / l;
    for (int64_t i = 0; i < dh; ++i) ot[i] *= inv;
    lse[t] = m + std::log(l);
  }
}

COHORT_SIMD_CLONES void backward_head(const Head& hd, int64_t T, int64_t dh, float scale,
                                      const float* dout, const float* lse, float* p, float* dp,
                                      float* dq, float* dk, float* dv) {
  std::fill(dk, dk + T * dh, 0.0f);
  std::fill(dv, dv + T * dh, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    const float *qt = hd.q + t * hd.qt, *gt = dout + t * dh;
    float big_d = 0;
    for (int64_t j = 0; j <= t; ++j) {
      p[j] = std::exp(scale * dot(qt, hd.k + j * hd.kt, dh) - lse[t]);
      dp[j] = dot(gt, hd.v + j * hd.vt, dh);
      big_d += p[j] * dp[j];
    }
    float* dqt = dq + t * dh;
    std::fill(dqt, dqt + dh, 0.0f);
    for (int64_t j = 0; j <= t; ++j) {
      const float ds = scale * p[j] * (dp[j] - big_d);
      axpy(dqt, ds, hd.k + j * hd.kt, dh);
      axpy(dk + j * dh, ds, qt, dh);
      axpy(dv + j * dh, p[j], gt, dh);
    }
  }
}

}  // namespace

void causal_attention_forward(const AttnShape& s, const AttnInputs& in, float* out, float* lse) {
  const float scale = 1.0f / std::sqrt(float(s.dh));
  const int64_t work = s.t * s.t * s.dh;  // per head
  parallel_for(0, s.b * s.h, std::max<int64_t>(1, (1 << 17) / std::max<int64_t>(work, 1)),
               [&](int64_t lo, int64_t hi) {
                 float* p = scratch(s.t);
                 for (int64_t bh = lo; bh < hi; ++bh)
                   forward_head(head_at(in, bh, s.h), s.t, s.dh, scale, p, out + bh * s.t * s.dh,
                                lse + bh * s.t);
               });
}

void causal_attention_backward(const AttnShape& s, const AttnInputs& in, const float* dout,
                               const float* lse, float* dq, float* dk, float* dv) {
  const float scale = 1.0f / std::sqrt(float(s.dh));
  const int64_t work = s.t * s.t * s.dh;
  parallel_for(0, s.b * s.h, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(work, 1)),
               [&](int64_t lo, int64_t hi) {
                 float* p = scratch(2 * s.t);
                 for (int64_t bh = lo; bh < hi; ++bh) {
                   const int64_t off = bh * s.t * s.dh;
                   backward_head(head_at(in, bh, s.h), s.t, s.dh, scale, dout + off, lse + bh * s.t,
                                 p, p + s.t, dq + off, dk + off, dv + off);
                 }
               });
}

}  // namespace cohort::cpu
