#include "cohort/kernels/cpu/optim.h"

#include <cmath>

#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {
namespace {

// p, g, m, v [n]: one fused pass over the four arrays.
COHORT_SIMD_CLONES
void adamw_loop(float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, int64_t n, AdamScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float mi = m[i] + s.one_minus_b1 * (gi - m[i]);
    float vi = v[i] * s.b2 + s.one_minus_b2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
    p[i] = p[i] * s.decay + s.neg_step_size * (mi / denom);
  }
}

// p, g, buf [n]. Plain SGD (no momentum): p -= lr * (g + wd * p).
COHORT_SIMD_CLONES
void sgd_plain(float* __restrict p, const float* __restrict g, int64_t n, SgdScalars s) {
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] + (-s.lr) * (g[i] + s.wd * p[i]);
}

// First momentum step: buf = g + wd * p; update with buf (nesterov: g + momentum * buf).
COHORT_SIMD_CLONES
void sgd_first(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
               SgdScalars s, bool nesterov) {
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + s.wd * p[i];
      buf[i] = d;
      p[i] = p[i] + (-s.lr) * (d + s.momentum * d);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + s.wd * p[i];
      buf[i] = d;
      p[i] = p[i] + (-s.lr) * d;
    }
  }
}

// Later steps: buf = momentum * buf + (1 - dampening) * d.
COHORT_SIMD_CLONES
void sgd_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
                  SgdScalars s, bool nesterov) {
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + s.wd * p[i];
      float b = buf[i] * s.momentum + s.one_minus_dampening * d;
      buf[i] = b;
      p[i] = p[i] + (-s.lr) * (d + s.momentum * b);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + s.wd * p[i];
      float b = buf[i] * s.momentum + s.one_minus_dampening * d;
      buf[i] = b;
      p[i] = p[i] + (-s.lr) * b;
    }
  }
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamScalars& s) {
  adamw_loop(p, g, m, v, n, s);
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s,
                SgdPhase phase, bool nesterov) {
  switch (phase) {
    case SgdPhase::kPlain:
      return sgd_plain(p, g, n, s);
    case SgdPhase::kFirst:
      return sgd_first(p, g, buf, n, s, nesterov);
    case SgdPhase::kMomentum:
      return sgd_momentum(p, g, buf, n, s, nesterov);
  }
}

}  // namespace cohort::cpu
