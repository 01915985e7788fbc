#include "cohort/optim/adamw.h"

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/kernels/cpu/optim.h"
#include "cohort/optim/device_batch.h"

namespace cohort::optim {

AdamW::AdamW(NamedParams params, AdamWOptions opt)
    : Optimizer(std::move(params), opt.lr, {"exp_avg", "exp_avg_sq"}), opt_(opt) {
  check_options();
}

AdamW::AdamW(const std::vector<Tensor>& params, AdamWOptions opt)
    : Optimizer(params, opt.lr, {"exp_avg", "exp_avg_sq"}), opt_(opt) {
  check_options();
}

void AdamW::check_options() const {
  auto [b1, b2] = opt_.betas;
  COHORT_CHECK_ARG(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, "AdamW: betas must be in [0, 1), got (",
                   b1, ", ", b2, ")");
  COHORT_CHECK_ARG(opt_.eps >= 0 && opt_.weight_decay >= 0, "AdamW: invalid eps ", opt_.eps,
                   " or weight_decay ", opt_.weight_decay);
}

void AdamW::step() {
  autograd::NoGradGuard no_grad;
  // Device parameters at the same step count go to the device as one list.
  DeviceBatch<cpu::AdamWParam, int64_t> on_device([&](Device d, int64_t t,
                                                      const std::vector<cpu::AdamWParam>& list) {
    dispatch::need(dispatch::kernels_for(d).adamw_update, "AdamW", d)(d, list, scalars(double(t)));
  });
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grad_of(i);
    if (!g.defined()) continue;
    ensure_slots(i);
    ParamState& st = state_[i];
    ++st.step;
    const Tensor& param = params_[i].second;
    float* p = param.data<float>();
    const float* gp = g.data<float>();
    float* m = st.slots[0].data<float>();
    float* v = st.slots[1].data<float>();
    if (const Device d = param.device(); !d.is_cpu()) {
      COHORT_INTERNAL(st.slots[0].device() == d && st.slots[1].device() == d, "AdamW state of '",
                      params_[i].first, "' is not on ", d.str());
      on_device.add(d, st.step, {p, gp, m, v, param.numel()});
      continue;
    }
    const cpu::AdamScalars s = scalars(double(st.step));
    parallel_for(0, param.numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      cpu::adamw_update(p + lo, gp + lo, m + lo, v + lo, hi - lo, s);
    });
  }
  on_device.flush();
}

// The update's float32 scalars at step t, computed in double (kernels/cpu/optim.h).
cpu::AdamScalars AdamW::scalars(double t) const {
  auto [b1, b2] = opt_.betas;
  cpu::AdamScalars s{};
  s.decay = float(1.0 - lr_ * opt_.weight_decay);
  s.one_minus_b1 = float(1.0 - b1);
  s.b2 = float(b2);
  s.one_minus_b2 = float(1.0 - b2);
  s.bc2_sqrt = float(std::sqrt(1.0 - std::pow(b2, t)));
  s.eps = float(opt_.eps);
  s.neg_step_size = float(-lr_ / (1.0 - std::pow(b1, t)));
  return s;
}

std::unique_ptr<Optimizer> AdamW::make_like(NamedParams params) const {
  auto o = opt_;
  o.lr = lr();
  return std::make_unique<AdamW>(std::move(params), o);
}

}  // namespace cohort::optim
