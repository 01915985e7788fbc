#pragma once
// Module: the base of every layer and model, like torch.nn.Module.
//
// A module owns parameters (leaf tensors with requires_grad), buffers (state without
// gradients) and child modules (shared_ptr), each under a name. Names nest with dots in
// registration order: own parameters first, then each child's, depth first, as PyTorch does:
// "blocks.0.attn.qkv.weight". That order is stable and is what optimizers, DDP buckets and
// checkpoints see, so it must not depend on anything but the model's structure.
//
// Initialisation: each parameter is registered with an Init rule. reset_parameters(seed) fills
// every parameter below this module from Philox with seed derive_seed(seed, full_name), so the
// values are a function of (seed, name, shape) only: the same on every rank, run and thread
// count. Call it on the root: names, and so values, are relative to the module it is called on.
// Leaf layers initialise themselves at construction from their own `seed` option; models call
// reset_parameters(options.seed) once their tree is built.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/autograd/scope.h"
#include "cohort/nn/init.h"
#include "cohort/tensor/tensor.h"

namespace cohort::nn {

// NamedTensors and ZeroGrad are tensor/tensor.h's (shared with optim/ and ckpt/).
using cohort::NamedTensors;
// Name -> value for parameters and buffers (what checkpoints store).
using StateDict = std::map<std::string, Tensor>;

struct LoadOptions {
  // Strict: a name the module has but the dict lacks (missing) or the other way round
  // (unexpected) is an error. Shape mismatches are always errors.
  bool strict = true;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules are identities (optimizers and DDP hold their parameter handles): no copies.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  // The computation. The default throws: containers without a forward of their own.
  virtual Tensor forward(const Tensor& x);
  // Calling a module runs forward() under its trace scope, if it has one (as torch's
  // module(x) runs hooks and module.forward(x) does not): models call their children this way.
  Tensor operator()(const Tensor& x) { return trace_scope_ ? traced_forward(x) : forward(x); }
  // Traces this module's forward and backward (autograd/scope.h); null stops it. The trainer's
  // timeline trace sets one on the modules it shows.
  void set_trace_scope(std::shared_ptr<const autograd::Scope> scope) {
    trace_scope_ = std::move(scope);
  }
  const std::shared_ptr<const autograd::Scope>& trace_scope() const { return trace_scope_; }
  // For error messages: "Linear", "GPT".
  virtual std::string type_name() const = 0;

  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Pre-order: this module first under "" , then each child ("blocks", "blocks.0", ...).
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  int64_t num_parameters() const;

  // Training mode (dropout active) or evaluation mode, set on this module and all below it.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad(ZeroGrad mode = ZeroGrad::kSetToNone);

  // Moves every parameter and buffer below this module to `device`, in place: each keeps its
  // identity (the handles a layer or an optimizer holds follow it), as torch's module.to does.
  // Gradients are dropped. A device without a backend is an InvalidArgument saying why
  // (tensor/device_memory.h); nothing has moved then.
  void to(Device device);

  // Refills every parameter below this module from its Init rule (see the header comment).
  void reset_parameters(uint64_t seed);
  // Replaces the Init rule of this module's own parameter `name` (models adjust their layers'
  // defaults with it, then call reset_parameters).
  void set_init(const std::string& name, const Init& rule);
  const Init& init_rule(const std::string& name) const;

  // Full name -> ShardSpec of every sharded parameter below this module (none for an ordinary
  // model): what a tensor-parallel checkpoint joins and cuts.
  std::map<std::string, ShardSpec> shard_specs() const;

  // Parameters and buffers by full name. The tensors share storage with the module (like
  // torch's state_dict); clone them to keep a snapshot.
  StateDict state_dict() const;
  // Copies values in by name. All-or-nothing: every problem (missing, unexpected, shape
  // mismatch) is listed in one InvalidArgument and nothing is written.
  void load_state_dict(const StateDict& dict, LoadOptions opt = {});

  // This module's own parameter or buffer by local name; InvalidArgument if absent.
  Tensor param(const std::string& name) const;
  Tensor buffer(const std::string& name) const;

 protected:
  // Adds a parameter (made a leaf with requires_grad). With a rule, reset_parameters refills
  // it; without one it keeps the values given. Returns the handle (shares the tensor).
  // A sharded parameter (tensor parallelism) passes its ShardSpec: reset_parameters fills it with
  // its slice of the full tensor's draw, and checkpoints join it with the other shards.
  Tensor register_parameter(const std::string& name, Tensor value,
                            std::optional<Init> rule = std::nullopt, ShardSpec shard = {});
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  struct ParamEntry {
    std::string name;
    Tensor value;
    std::optional<Init> rule;
    ShardSpec shard;
  };
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect_params(const std::string& prefix, NamedTensors& out) const;
  void collect_buffers(const std::string& prefix, NamedTensors& out) const;
  void collect_shards(const std::string& prefix, std::map<std::string, ShardSpec>& out) const;
  void reset_below(const std::string& prefix, uint64_t seed);
  Tensor traced_forward(const Tensor& x);

  std::vector<ParamEntry> params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<const autograd::Scope> trace_scope_;
};

}  // namespace cohort::nn
