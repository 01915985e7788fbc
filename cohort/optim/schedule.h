#pragma once
// Learning-rate schedules: pure functions of the step (0-based), so resuming at step k gives
// the same rate as an uninterrupted run. apply() writes the rate into an optimizer.
#include <cstdint>

#include "cohort/optim/optimizer.h"

namespace cohort::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
  void apply(Optimizer& opt, int64_t step) const { opt.set_lr(lr_at(step)); }
};

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr_at(int64_t step) const override { return lr_; }

 private:
  double lr_;
};

struct StepLrOptions {
  double lr = 0.1;
  int64_t step_size = 1;  // multiply by gamma every step_size steps
  double gamma = 0.1;
};
// lr * gamma^floor(step / step_size), as torch.optim.lr_scheduler.StepLR.
class StepLr : public LrSchedule {
 public:
  explicit StepLr(StepLrOptions opt);
  double lr_at(int64_t step) const override;

 private:
  StepLrOptions opt_;
};

struct WarmupCosineOptions {
  double lr = 1e-3;  // peak, reached at the end of warmup
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;  // the cosine reaches min_lr here and stays there
  double min_lr = 0.0;
};
// Linear warmup then cosine decay (nanoGPT's get_lr):
//   step < warmup:           lr * (step + 1) / warmup
//   warmup <= step < total:  min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * r)),
//                            r = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
class WarmupCosineLr : public LrSchedule {
 public:
  explicit WarmupCosineLr(WarmupCosineOptions opt);
  double lr_at(int64_t step) const override;

 private:
  WarmupCosineOptions opt_;
};

}  // namespace cohort::optim
