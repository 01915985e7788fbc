#include "cohort/optim/schedule.h"

#include <cmath>

namespace cohort::optim {
namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

ConstantLr::ConstantLr(double lr) : lr_(lr) {
  COHORT_CHECK_ARG(std::isfinite(lr) && lr >= 0, "ConstantLr: invalid lr ", lr);
}

StepLr::StepLr(StepLrOptions opt) : opt_(opt) {
  COHORT_CHECK_ARG(std::isfinite(opt.lr) && opt.lr >= 0 && opt.step_size > 0 && opt.gamma >= 0,
                   "StepLr: invalid lr ", opt.lr, ", step_size ", opt.step_size, " or gamma ",
                   opt.gamma);
}

double StepLr::lr_at(int64_t step) const {
  COHORT_CHECK_ARG(step >= 0, "StepLr: negative step ", step);
  return opt_.lr * std::pow(opt_.gamma, double(step / opt_.step_size));
}

WarmupCosineLr::WarmupCosineLr(WarmupCosineOptions opt) : opt_(opt) {
  COHORT_CHECK_ARG(std::isfinite(opt.lr) && opt.lr >= 0 && opt.min_lr >= 0 && opt.min_lr <= opt.lr,
                   "WarmupCosineLr: need 0 <= min_lr <= lr, got lr ", opt.lr, " min_lr ",
                   opt.min_lr);
  COHORT_CHECK_ARG(opt.warmup_steps >= 0 && opt.total_steps >= opt.warmup_steps,
                   "WarmupCosineLr: need 0 <= warmup_steps <= total_steps, got warmup ",
                   opt.warmup_steps, " total ", opt.total_steps);
}

double WarmupCosineLr::lr_at(int64_t step) const {
  COHORT_CHECK_ARG(step >= 0, "WarmupCosineLr: negative step ", step);
  if (step < opt_.warmup_steps) return opt_.lr * double(step + 1) / double(opt_.warmup_steps);
  if (step >= opt_.total_steps) return opt_.min_lr;
  double r = double(step - opt_.warmup_steps) / double(opt_.total_steps - opt_.warmup_steps);
  return opt_.min_lr + (opt_.lr - opt_.min_lr) * 0.5 * (1.0 + std::cos(kPi * r));
}

}  // namespace cohort::optim
