#include "cohort/nn/module.h"

#include <algorithm>
#include <set>

#include "cohort/autograd/node.h"

namespace cohort::nn {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  return name.empty() ? prefix : prefix + "." + name;
}

// At most this many names per category in a load_state_dict error, so a wrong checkpoint for
// a big model still gives a readable message.
constexpr size_t kMaxListed = 8;

void append_list(std::string& msg, const char* what, const std::vector<std::string>& names) {
  if (names.empty()) return;
  msg += detail::str("\n  ", what, " (", names.size(), "): ");
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) msg += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed) msg += ", ...";
}

}  // namespace

Tensor Module::forward(const Tensor& x) {
  throw InvalidArgument(type_name() + " has no forward(Tensor); call its children instead");
}

Tensor Module::traced_forward(const Tensor& x) {
  autograd::ScopeGuard scope(trace_scope_);
  return forward(x);
}

void Module::check_new_name(const std::string& name) const {
  COHORT_CHECK_ARG(!name.empty() && name.find('.') == std::string::npos, type_name(),
                   ": invalid member name '", name, "' (must be non-empty without '.')");
  bool taken = std::any_of(params_.begin(), params_.end(),
                           [&](const ParamEntry& e) { return e.name == name; }) ||
               std::any_of(buffers_.begin(), buffers_.end(),
                           [&](const auto& e) { return e.first == name; }) ||
               std::any_of(children_.begin(), children_.end(),
                           [&](const auto& e) { return e.first == name; });
  COHORT_CHECK_ARG(!taken, type_name(), ": name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor value, std::optional<Init> rule,
                                  ShardSpec shard) {
  check_new_name(name);
  COHORT_CHECK_ARG(value.defined() && value.dtype() == DType::f32 && value.is_contiguous(),
                   type_name(), ": parameter '", name, "' must be a contiguous float32 tensor");
  COHORT_CHECK_ARG(value.is_leaf(), type_name(), ": parameter '", name,
                   "' must be a leaf tensor (detach it first)");
  value.set_requires_grad(true);
  if (shard.sharded()) full_shape(value.shape(), shard);  // checks the spec fits
  params_.push_back({name, value, rule, shard});
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  COHORT_CHECK_ARG(value.defined(), type_name(), ": buffer '", name, "' is undefined");
  buffers_.emplace_back(name, value);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  COHORT_CHECK_ARG(module != nullptr, type_name(), ": child module '", name, "' is null");
  COHORT_CHECK_ARG(module.get() != this, type_name(), ": a module cannot be its own child");
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect_params(const std::string& prefix, NamedTensors& out) const {
  for (const ParamEntry& e : params_) out.emplace_back(join(prefix, e.name), e.value);
  for (const auto& [name, child] : children_) child->collect_params(join(prefix, name), out);
}

void Module::collect_buffers(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, b] : buffers_) out.emplace_back(join(prefix, name), b);
  for (const auto& [name, child] : children_) child->collect_buffers(join(prefix, name), out);
}

void Module::collect_shards(const std::string& prefix,
                            std::map<std::string, ShardSpec>& out) const {
  for (const ParamEntry& e : params_)
    if (e.shard.sharded()) out[join(prefix, e.name)] = e.shard;
  for (const auto& [name, child] : children_) child->collect_shards(join(prefix, name), out);
}

std::map<std::string, ShardSpec> Module::shard_specs() const {
  std::map<std::string, ShardSpec> out;
  collect_shards("", out);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect_params("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect_buffers("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(join(name, sub), m);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (auto& [name, m] : const_cast<Module*>(this)->named_modules()) out.emplace_back(name, m);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad(ZeroGrad mode) {
  zero_grads(named_parameters(), mode);
}

void Module::reset_below(const std::string& prefix, uint64_t seed) {
  for (ParamEntry& e : params_) {
    if (e.rule)
      init::fill_shard_(e.value, *e.rule, init::param_seed(seed, join(prefix, e.name)), e.shard);
  }
  for (auto& [name, child] : children_) child->reset_below(join(prefix, name), seed);
}

void Module::reset_parameters(uint64_t seed) {
  reset_below("", seed);
}

void Module::set_init(const std::string& name, const Init& rule) {
  for (ParamEntry& e : params_) {
    if (e.name == name) {
      e.rule = rule;
      return;
    }
  }
  throw InvalidArgument(detail::str(type_name(), ": no parameter named '", name, "'"));
}

const Init& Module::init_rule(const std::string& name) const {
  for (const ParamEntry& e : params_) {
    if (e.name != name) continue;
    COHORT_CHECK_ARG(e.rule.has_value(), type_name(), ": parameter '", name,
                     "' has no init rule (its values were given at registration)");
    return *e.rule;
  }
  throw InvalidArgument(detail::str(type_name(), ": no parameter named '", name, "'"));
}

Tensor Module::param(const std::string& name) const {
  for (const ParamEntry& e : params_)
    if (e.name == name) return e.value;
  throw InvalidArgument(detail::str(type_name(), ": no parameter named '", name, "'"));
}

Tensor Module::buffer(const std::string& name) const {
  for (const auto& [n, b] : buffers_)
    if (n == name) return b;
  throw InvalidArgument(detail::str(type_name(), ": no buffer named '", name, "'"));
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t.detach());
  for (auto& [name, t] : named_buffers()) out.emplace(name, t.detach());
  return out;
}

void Module::load_state_dict(const StateDict& dict, LoadOptions opt) {
  NamedTensors own = named_parameters();
  NamedTensors bufs = named_buffers();
  own.insert(own.end(), bufs.begin(), bufs.end());
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> own_names;
  for (auto& [name, t] : own) {
    own_names.insert(name);
    auto it = dict.find(name);
    if (it == dict.end()) {
      missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != t.shape()) {
      std::string got = it->second.defined() ? shape_str(it->second.shape()) : "undefined";
      mismatched.push_back(
          detail::str(name, " (model ", shape_str(t.shape()), ", dict ", got, ")"));
    }
  }
  for (auto& [name, t] : dict)
    if (!own_names.count(name)) unexpected.push_back(name);
  if (!opt.strict) {
    missing.clear();
    unexpected.clear();
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string msg = type_name() + ": load_state_dict failed, nothing was loaded:";
    append_list(msg, "missing", missing);
    append_list(msg, "unexpected", unexpected);
    append_list(msg, "shape mismatch", mismatched);
    throw InvalidArgument(msg);
  }
  autograd::NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    auto it = dict.find(name);
    if (it == dict.end()) continue;
    Tensor dst = t.detach();
    dst.copy_(it->second);
  }
}

namespace {

// t's storage replaced by a contiguous copy on `device`; every handle sharing t's TensorImpl
// sees the move.
void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  Tensor moved = t.detach().to(device);
  TensorImpl& impl = t.impl();
  impl.storage = moved.impl().storage;
  impl.offset = moved.offset();
  impl.strides = moved.strides();
  impl.grad = nullptr;
}

}  // namespace

void Module::to(Device device) {
  const NamedTensors params = named_parameters(), buffers = named_buffers();
  if (!params.empty() || !buffers.empty()) empty({0}, DType::f32, device);  // fails before a move
  for (const auto& [name, t] : params) move_in_place(t, device);
  for (const auto& [name, t] : buffers) move_in_place(t, device);
}

}  // namespace cohort::nn
