#include "cohort/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "cohort/autograd/node.h"

namespace cohort::optim {
namespace {

NamedParams name_by_position(const std::vector<Tensor>& params) {
  NamedParams out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(std::to_string(i), params[i]);
  return out;
}

// "blocks.0.attn.qkv.weight.exp_avg" -> {"blocks.0.attn.qkv.weight", "exp_avg"}.
std::pair<std::string, std::string> split_key(const std::string& key) {
  size_t dot = key.rfind('.');
  if (dot == std::string::npos) return {key, ""};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

}  // namespace

Optimizer::Optimizer(NamedParams params, double lr, std::vector<std::string> slot_names)
    : params_(std::move(params)),
      state_(params_.size()),
      slot_names_(std::move(slot_names)),
      lr_(lr) {
  check_params();
}

std::unique_ptr<Optimizer> Optimizer::make_like(NamedParams) const {
  throw InvalidArgument(detail::str("optimizer ", type_name(),
                                    " cannot be sharded (ZeRO): it has no make_like(); SGD and "
                                    "AdamW can"));
}

Optimizer::Optimizer(const std::vector<Tensor>& params, double lr,
                     std::vector<std::string> slot_names)
    : Optimizer(name_by_position(params), lr, std::move(slot_names)) {}

void Optimizer::check_params() const {
  COHORT_CHECK_ARG(std::isfinite(lr_) && lr_ >= 0, "optimizer: invalid learning rate ", lr_);
  std::set<std::string> names;
  std::set<const TensorImpl*> impls;
  for (const auto& [name, p] : params_) {
    COHORT_CHECK_ARG(p.defined(), "optimizer: parameter '", name, "' is undefined");
    COHORT_CHECK_ARG(p.dtype() == DType::f32 && p.is_contiguous() && p.is_leaf(),
                     "optimizer: parameter '", name, "' must be a contiguous float32 leaf, got ",
                     dtype_name(p.dtype()), " ", shape_str(p.shape()));
    COHORT_CHECK_ARG(names.insert(name).second, "optimizer: parameter name '", name,
                     "' appears twice");
    COHORT_CHECK_ARG(impls.insert(p.impl_ptr().get()).second, "optimizer: parameter '", name,
                     "' is the same tensor as an earlier one");
  }
}

void Optimizer::set_lr(double lr) {
  COHORT_CHECK_ARG(std::isfinite(lr) && lr >= 0, type_name(), ": invalid learning rate ", lr);
  lr_ = lr;
}

void Optimizer::zero_grad(ZeroGrad mode) {
  zero_grads(params_, mode);
}

Tensor Optimizer::grad_of(size_t i) const {
  const Tensor& p = params_[i].second;
  Tensor g = p.grad();
  if (!g.defined()) return g;
  COHORT_CHECK_ARG(g.shape() == p.shape() && g.dtype() == DType::f32, type_name(),
                   ": gradient of '", params_[i].first, "' is ", dtype_name(g.dtype()), " ",
                   shape_str(g.shape()), ", parameter is ", shape_str(p.shape()));
  COHORT_CHECK_ARG(g.device() == p.device(), type_name(), ": gradient of '", params_[i].first,
                   "' is on ", g.device().str(), ", the parameter on ", p.device().str());
  return g.is_contiguous() ? g : g.contiguous_raw();
}

void Optimizer::ensure_slots(size_t i) {
  ParamState& s = state_[i];
  if (!s.slots.empty()) return;
  MemoryKindScope kind(MemoryKind::kOptimizer);  // counted as optimizer state (allocator.h)
  for (size_t k = 0; k < slot_names_.size(); ++k)
    s.slots.push_back(zeros(params_[i].second.shape(), DType::f32, params_[i].second.device()));
}

OptimizerState Optimizer::export_state() const {
  OptimizerState out;
  out.scalars["lr"] = lr_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    const ParamState& s = state_[i];
    if (s.step > 0) out.scalars[name + ".step"] = double(s.step);
    for (size_t k = 0; k < s.slots.size(); ++k)
      if (s.slots[k].defined()) out.tensors[name + "." + slot_names_[k]] = s.slots[k].clone_raw();
  }
  return out;
}

void Optimizer::validate_state(const OptimizerState& st) const {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].first] = i;
  std::string expect = "expected '<param>.<slot>' with slot in {";
  for (size_t k = 0; k < slot_names_.size(); ++k) expect += (k ? ", " : "") + slot_names_[k];
  expect += "}";
  for (const auto& [key, t] : st.tensors) {
    auto [pname, slot] = split_key(key);
    auto it = index.find(pname);
    bool known = it != index.end() &&
                 std::find(slot_names_.begin(), slot_names_.end(), slot) != slot_names_.end();
    COHORT_CHECK_ARG(known, type_name(), " import_state: unexpected key '", key, "' (", expect,
                     ")");
    const Tensor& p = params_[it->second].second;
    COHORT_CHECK_ARG(t.defined() && t.shape() == p.shape(), type_name(), " import_state: key '",
                     key, "' has shape ", t.defined() ? shape_str(t.shape()) : "undefined",
                     ", parameter '", pname, "' has ", shape_str(p.shape()));
  }
  for (const auto& [key, v] : st.scalars) {
    if (key == "lr") {
      COHORT_CHECK_ARG(std::isfinite(v) && v >= 0, type_name(), " import_state: invalid lr ", v);
      continue;
    }
    auto [pname, what] = split_key(key);
    COHORT_CHECK_ARG(what == "step" && index.count(pname), type_name(),
                     " import_state: unexpected scalar '", key, "' (expected 'lr' or ",
                     "'<param>.step')");
    COHORT_CHECK_ARG(v >= 0 && v == std::floor(v), type_name(), " import_state: '", key,
                     "' must be a non-negative integer, got ", v);
  }
  for (const auto& [pname, i] : index) {
    auto it = st.scalars.find(pname + ".step");
    bool stepped = it != st.scalars.end() && it->second > 0;
    for (const std::string& slot : required_slots()) {
      bool has = st.tensors.count(pname + "." + slot) > 0;
      COHORT_CHECK_ARG(has || !stepped, type_name(), " import_state: missing key '", pname, ".",
                       slot, "' for a parameter at step ", stepped ? it->second : 0.0);
      COHORT_CHECK_ARG(stepped || !has, type_name(), " import_state: missing key '", pname,
                       ".step' (state '", pname, ".", slot, "' is given)");
    }
  }
}

void Optimizer::import_state(const OptimizerState& st) {
  validate_state(st);
  autograd::NoGradGuard no_grad;
  MemoryKindScope kind(MemoryKind::kOptimizer);
  std::vector<ParamState> fresh(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    auto step = st.scalars.find(name + ".step");
    if (step != st.scalars.end()) fresh[i].step = int64_t(step->second);
    bool any = false;
    std::vector<Tensor> slots(slot_names_.size());
    for (size_t k = 0; k < slot_names_.size(); ++k) {
      auto it = st.tensors.find(name + "." + slot_names_[k]);
      if (it == st.tensors.end()) continue;
      slots[k] = empty(params_[i].second.shape(), DType::f32, params_[i].second.device());
      slots[k].copy_(it->second);
      any = true;
    }
    if (any) {
      for (auto& s : slots)
        if (!s.defined())
          s = zeros(params_[i].second.shape(), DType::f32, params_[i].second.device());
      fresh[i].slots = std::move(slots);
    }
  }
  state_ = std::move(fresh);
  auto lr = st.scalars.find("lr");
  if (lr != st.scalars.end()) lr_ = lr->second;
}

}  // namespace cohort::optim
