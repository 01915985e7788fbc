#include "cohort/optim/sgd.h"

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/thread_pool.h"
#include "cohort/dispatch/kernel_table.h"
#include "cohort/kernels/cpu/optim.h"
#include "cohort/optim/device_batch.h"

namespace cohort::optim {

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
  const cpu::SgdScalars s{float(lr_), float(opt_.weight_decay), float(opt_.momentum),
                          float(1.0 - opt_.dampening)};
  const bool nesterov = opt_.nesterov;
  // Device parameters in the same phase go to the device as one list.
  DeviceBatch<cpu::SgdParam, cpu::SgdPhase> on_device(
      [&](Device d, cpu::SgdPhase phase, const std::vector<cpu::SgdParam>& list) {
        dispatch::need(dispatch::kernels_for(d).sgd_update, "SGD", d)(d, list, s, phase, nesterov);
      });
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = grad_of(i);
    if (!g.defined()) continue;
    const Tensor& param = params_[i].second;
    float* p = param.data<float>();
    const float* gp = g.data<float>();
    ParamState& st = state_[i];
    bool first = st.slots.empty();
    if (opt_.momentum != 0 && first) ensure_slots(i);
    float* buf = opt_.momentum != 0 ? st.slots[0].data<float>() : nullptr;
    const cpu::SgdPhase phase = !buf    ? cpu::SgdPhase::kPlain
                                : first ? cpu::SgdPhase::kFirst
                                        : cpu::SgdPhase::kMomentum;
    ++st.step;
    if (const Device d = param.device(); !d.is_cpu()) {
      COHORT_INTERNAL(!buf || st.slots[0].device() == d, "SGD momentum of '", params_[i].first,
                      "' is not on ", d.str());
      on_device.add(d, phase, {p, gp, buf, param.numel()});
      continue;
    }
    parallel_for(0, param.numel(), kUpdateGrain, [&](int64_t lo, int64_t hi) {
      cpu::sgd_update(p + lo, gp + lo, buf ? buf + lo : nullptr, hi - lo, s, phase, nesterov);
    });
  }
  on_device.flush();
}

std::unique_ptr<Optimizer> SGD::make_like(NamedParams params) const {
  auto o = opt_;
  o.lr = lr();
  return std::make_unique<SGD>(std::move(params), o);
}

}  // namespace cohort::optim
