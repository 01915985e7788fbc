#pragma once
// SGD with momentum, dampening, Nesterov and L2 weight decay, exactly as torch.optim.SGD:
//   g = grad + weight_decay * p
//   if momentum != 0:
//     buf = g                                      (first step of this parameter)
//     buf = momentum * buf + (1 - dampening) * g   (later steps)
//     g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// State slot: "momentum_buffer" (only with momentum != 0).
#include "cohort/optim/optimizer.h"

namespace cohort::optim {

struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class SGD : public Optimizer {
 public:
  SGD(NamedParams params, SgdOptions opt);
  SGD(const std::vector<Tensor>& params, SgdOptions opt);
  void step() override;
  std::string type_name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> make_like(NamedParams params) const override;
  const SgdOptions& options() const { return opt_; }

 protected:
  std::vector<std::string> required_slots() const override;

 private:
  void check_options() const;
  SgdOptions opt_;
};

}  // namespace cohort::optim
