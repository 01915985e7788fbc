#include "cohort/optim/sgd.h"

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::optim {
namespace {

struct SgdScalars {
  float lr, wd, momentum, one_minus_dampening;
};

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

SGD::SGD(NamedParams params, SgdOptions opt)
    : Optimizer(std::move(params), opt.lr, {"momentum_buffer"}), opt_(opt) {
  check_options();
}

SGD::SGD(const std::vector<Tensor>& params, SgdOptions opt)
    : Optimizer(params, opt.lr, {"momentum_buffer"}), opt_(opt) {
  check_options();
}

void SGD::check_options() const {
  COHORT_CHECK_ARG(opt_.momentum >= 0 && opt_.weight_decay >= 0 && std::isfinite(opt_.dampening),
                   "SGD: invalid momentum ", opt_.momentum, ", dampening ", opt_.dampening,
                   " or weight_decay ", opt_.weight_decay);
  COHORT_CHECK_ARG(!opt_.nesterov || (opt_.momentum > 0 && opt_.dampening == 0),
                   "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", opt_.momentum,
                   " dampening ", opt_.dampening);
}

std::vector<std::string> SGD::required_slots() const {
  if (opt_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  SgdScalars s{float(lr_), float(opt_.weight_decay), float(opt_.momentum),
               float(1.0 - opt_.dampening)};
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grad_of(i);
    if (!g.defined()) continue;
    float* p = params_[i].second.data<float>();
    const float* gp = g.data<float>();
    ParamState& st = state_[i];
    bool first = st.slots.empty();
    if (opt_.momentum != 0 && first) ensure_slots(i);
    float* buf = opt_.momentum != 0 ? st.slots[0].data<float>() : nullptr;
    bool nesterov = opt_.nesterov;
    parallel_for(0, params_[i].second.numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      if (!buf) {
        sgd_plain(p + lo, gp + lo, hi - lo, s);
      } else if (first) {
        sgd_first(p + lo, gp + lo, buf + lo, hi - lo, s, nesterov);
      } else {
        sgd_momentum(p + lo, gp + lo, buf + lo, hi - lo, s, nesterov);
      }
    });
    ++st.step;
  }
}

std::unique_ptr<Optimizer> SGD::make_like(NamedParams params) const {
  auto o = opt_;
  o.lr = lr();
  return std::make_unique<SGD>(std::move(params), o);
}

}  // namespace cohort::optim
