#pragma once
// Optimizer: updates a fixed list of named parameters from their .grad, like torch.optim.
//
// Per-parameter state is a set of named slots (SGD: momentum_buffer; AdamW: exp_avg,
// exp_avg_sq) plus a step count, created on a parameter's first update. Parameters whose grad
// is undefined are skipped, as in PyTorch. Updates run under NoGradGuard in place, so handles
// held elsewhere (the model, DDP) see the new values.
//
// export_state()/import_state() move that state through an OptimizerState keyed by name:
//   tensors "<param>.<slot>"  (e.g. "layers.0.weight.momentum_buffer")
//   scalars "<param>.step" and "lr"
// Parameters given without names are named by position: "0", "1", ...
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::optim {

using NamedParams = NamedTensors;  // tensor/tensor.h

struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};

// How zero_grad clears gradients: tensor/tensor.h's ZeroGrad, the one nn::Module uses too.
using cohort::ZeroGrad;

class Optimizer {
 public:
  Optimizer(NamedParams params, double lr, std::vector<std::string> slot_names);
  Optimizer(const std::vector<Tensor>& params, double lr, std::vector<std::string> slot_names);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  virtual std::string type_name() const = 0;
  // A fresh optimizer of the same kind and hyperparameters (lr included) over `params`, with
  // no state: ZeRO steps flat shards with it. The default is InvalidArgument naming the type.
  virtual std::unique_ptr<Optimizer> make_like(NamedParams params) const;
  void zero_grad(ZeroGrad mode = ZeroGrad::kSetToNone);

  double lr() const { return lr_; }
  void set_lr(double lr);
  const NamedParams& params() const { return params_; }
  // The state slots each parameter gets ("exp_avg", "exp_avg_sq"; SGD: "momentum_buffer").
  const std::vector<std::string>& slot_names() const { return slot_names_; }
  // Updates applied to parameter i so far (0 before its first step with a gradient).
  int64_t step_count(size_t i) const { return state_.at(i).step; }

  // A snapshot (copies) of the state; see the header comment for the keys.
  OptimizerState export_state() const;
  // Replaces the state. Validated first, all-or-nothing: an unknown key, a slot whose shape
  // differs from its parameter, or a parameter with step > 0 but a missing slot is
  // InvalidArgument naming the key. Parameters absent from the state start fresh.
  void import_state(const OptimizerState& state);

 protected:
  struct ParamState {
    std::vector<Tensor> slots;  // undefined until the first update
    int64_t step = 0;
  };
  // The slots a parameter with step > 0 must have (SGD without momentum has none).
  virtual std::vector<std::string> required_slots() const { return slot_names_; }
  // Grad of parameter i as a contiguous f32 tensor of the parameter's shape, or undefined.
  Tensor grad_of(size_t i) const;
  // Creates parameter i's slots, zero-filled, if they do not exist yet.
  void ensure_slots(size_t i);

  NamedParams params_;
  std::vector<ParamState> state_;
  std::vector<std::string> slot_names_;
  double lr_;

 private:
  void check_params() const;
  void validate_state(const OptimizerState& s) const;
};

// Elementwise loops are split over the thread pool in chunks of this many elements; smaller
// parameters run on the calling thread.
inline constexpr int64_t kUpdateGrain = 1 << 15;

}  // namespace cohort::optim
