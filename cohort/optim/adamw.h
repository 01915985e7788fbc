#pragma once
// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, as torch.optim.AdamW. Per
// parameter, at its step t (counting from 1):
//   p = p * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State slots: "exp_avg" (m), "exp_avg_sq" (v); scalar "<param>.step" (t).
#include <utility>

#include "cohort/kernels/cpu/optim.h"
#include "cohort/optim/optimizer.h"

namespace cohort::optim {

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedParams params, AdamWOptions opt = {});
  AdamW(const std::vector<Tensor>& params, AdamWOptions opt = {});
  void step() override;
  std::string type_name() const override { return "AdamW"; }
  std::unique_ptr<Optimizer> make_like(NamedParams params) const override;
  const AdamWOptions& options() const { return opt_; }

 private:
  void check_options() const;
  cpu::AdamScalars scalars(double t) const;
  AdamWOptions opt_;
};

}  // namespace cohort::optim
