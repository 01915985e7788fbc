// The bf16 causal attention (attention.h), emulated on the CPU: the roundings of the GPU's
// tensor-core kernels (kernels/cuda/attention_bf16_*.cu) at the same points, in plain loops.
// Per head, q, k, v (and dout) are rounded to bf16 once into scratch copies, as the kernels
// round them on their way into shared memory; every sum is f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cohort/core/dtype.h"
#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/attention.h"

namespace cohort::cpu {
// Its own namespace: attention.cc's helpers have the same names, and a unity build compiles
// both files as one.
namespace bf16_attention {
namespace {

float bf16(float x) {
  return bf16_to_float(float_to_bf16(x));
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// One head's q, k, v rounded to bf16, as contiguous [T, Dh] rows.
struct RoundedHead {
  std::vector<float> q, k, v;
};

std::vector<float> rounded_rows(const float* src, int64_t ld, int64_t t, int64_t dh) {
  std::vector<float> out(size_t(t * dh));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t d = 0; d < dh; ++d) out[size_t(i * dh + d)] = bf16(src[i * ld + d]);
  return out;
}

RoundedHead rounded_head(const AttnInputs& in, int64_t bh, const AttnShape& s) {
  const int64_t b = bh / s.h, h = bh % s.h;
  return {rounded_rows(in.q + b * in.qs.b + h * in.qs.h, in.qs.t, s.t, s.dh),
          rounded_rows(in.k + b * in.ks.b + h * in.ks.h, in.ks.t, s.t, s.dh),
          rounded_rows(in.v + b * in.vs.b + h * in.vs.h, in.vs.t, s.t, s.dh)};
}

void forward_head(const RoundedHead& hd, int64_t T, int64_t dh, float scale, float* out,
                  float* lse) {
  std::vector<float> acc(static_cast<size_t>(dh)), pv(static_cast<size_t>(dh));
  float s[kAttnBf16Tile];
  for (int64_t t = 0; t < T; ++t) {
    const float* qt = hd.q.data() + t * dh;
    float m = -INFINITY, l = 0.f;
    std::fill(acc.begin(), acc.end(), 0.f);
    // Key tiles from 0 up to the one holding t: each has a visible key (its first) for t.
    for (int64_t k0 = 0; k0 <= t; k0 += kAttnBf16Tile) {
      const int64_t n = std::min(kAttnBf16Tile, t - k0 + 1);  // visible keys of the tile
      float tile_max = -INFINITY;
      for (int64_t jj = 0; jj < n; ++jj) {
        s[jj] = scale * dot(qt, hd.k.data() + (k0 + jj) * dh, dh);
        tile_max = std::max(tile_max, s[jj]);
      }
      const float m_new = std::max(m, tile_max);
      const float alpha = m == -INFINITY ? 0.f : std::exp(m - m_new);
      float sum = 0.f;
      std::fill(pv.begin(), pv.end(), 0.f);
      for (int64_t jj = 0; jj < n; ++jj) {
        const float p = std::exp(s[jj] - m_new);
        sum += p;
        axpy(pv.data(), bf16(p), hd.v.data() + (k0 + jj) * dh, dh);
      }
      l = l * alpha + sum;
      m = m_new;
      for (int64_t d = 0; d < dh; ++d) acc[size_t(d)] = alpha * acc[size_t(d)] + pv[size_t(d)];
    }
    const float inv = 1.f / l;  // the kernel scales by the reciprocal too
    for (int64_t d = 0; d < dh; ++d) out[t * dh + d] = acc[size_t(d)] * inv;
    lse[t] = m + std::log(l);
  }
}

void backward_head(const RoundedHead& hd, int64_t T, int64_t dh, float scale, const float* out,
                   const float* dout, const float* lse, float* dq, float* dk, float* dv) {
  std::fill(dq, dq + T * dh, 0.f);
  std::fill(dk, dk + T * dh, 0.f);
  std::fill(dv, dv + T * dh, 0.f);
  const std::vector<float> g = rounded_rows(dout, dh, T, dh);  // bf16(dout)
  for (int64_t t = 0; t < T; ++t) {
    const float *qt = hd.q.data() + t * dh, *gt = g.data() + t * dh;
    const float big_d = dot(gt, out + t * dh, dh);  // bf16(dout) . out, as dp's dout
    for (int64_t j = 0; j <= t; ++j) {
      const float p = std::exp(scale * dot(qt, hd.k.data() + j * dh, dh) - lse[t]);
      const float dp = dot(gt, hd.v.data() + j * dh, dh);
      const float ds = bf16(scale * p * (dp - big_d));
      axpy(dq + t * dh, ds, hd.k.data() + j * dh, dh);
      axpy(dk + j * dh, ds, qt, dh);
      axpy(dv + j * dh, bf16(p), gt, dh);
    }
  }
}

}  // namespace
}  // namespace bf16_attention

void causal_attention_forward_bf16(const AttnShape& s, const AttnInputs& in, float* out,
                                   float* lse) {
  if (!attn_bf16_head_dim(s.dh)) return causal_attention_forward(s, in, out, lse);
  const float scale = 1.0f / std::sqrt(float(s.dh));
  parallel_for(0, s.b * s.h, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh)
      bf16_attention::forward_head(bf16_attention::rounded_head(in, bh, s), s.t, s.dh, scale,
                                   out + bh * s.t * s.dh, lse + bh * s.t);
  });
}

void causal_attention_backward_bf16(const AttnShape& s, const AttnInputs& in, const float* out,
                                    const float* dout, const float* lse, float* dq, float* dk,
                                    float* dv) {
  if (!attn_bf16_head_dim(s.dh)) return causal_attention_backward(s, in, dout, lse, dq, dk, dv);
  const float scale = 1.0f / std::sqrt(float(s.dh));
  parallel_for(0, s.b * s.h, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t off = bh * s.t * s.dh;
      bf16_attention::backward_head(bf16_attention::rounded_head(in, bh, s), s.t, s.dh, scale,
                                    out + off, dout + off, lse + bh * s.t, dq + off, dk + off,
                                    dv + off);
    }
  });
}

}  // namespace cohort::cpu
