// ZeroEngine's optimizer state in checkpoints (zero_engine.h): the shard optimizer steps one
// flat tensor per unit, but a checkpoint speaks of each parameter's slots ("<param>.<slot>" of
// the parameter's shape) as the plain optimizer names them. Saving cuts each unit's slot along
// the unit's layout into the parameters' pieces this rank holds; loading reads back, from a
// checkpoint of any layout, the element ranges of this rank's shard.
#include "cohort/autograd/node.h"
#include "cohort/parallel/zero_engine.h"

namespace cohort::parallel {
namespace {

Tensor range_of(const Tensor& flat, int64_t begin, int64_t n) {
  return flat.as_strided({n}, {1}, flat.offset() + begin);
}

std::string unit_key(const ZeroEngine::Unit& u) {
  return u.plan.name.empty() ? "<root>" : u.plan.name;
}

}  // namespace

std::vector<ckpt::TensorPiece> ZeroEngine::optimizer_pieces() const {
  const optim::OptimizerState st = shard_opt_->export_state();
  std::vector<ckpt::TensorPiece> out;
  for (const Unit& u : units_) {
    const int64_t shard_begin = rank_ * u.layout.shard_size();
    for (const std::string& slot : shard_opt_->slot_names()) {
      auto it = st.tensors.find(unit_key(u) + "." + slot);
      if (it == st.tensors.end()) continue;  // not created yet (no step taken)
      for (const ckpt::FlatPiece& p : u.layout.pieces_of_shard(rank_)) {
        const auto& [name, param] = u.plan.params[p.index];
        out.push_back({"optimizer", name + "." + slot, param.shape(), p.begin,
                       range_of(it->second, p.flat_begin - shard_begin, p.end - p.begin)});
      }
    }
  }
  return out;
}

std::map<std::string, double> ZeroEngine::optimizer_scalars() const {
  const optim::OptimizerState st = shard_opt_->export_state();
  std::map<std::string, double> out{{"lr", shard_opt_->lr()}};
  for (const Unit& u : units_) {
    auto it = st.scalars.find(unit_key(u) + ".step");
    if (it == st.scalars.end() || it->second == 0) continue;
    for (const auto& [name, param] : u.plan.params) out[name + ".step"] = it->second;
  }
  return out;
}

// The unit's step count from its parameters' ("<param>.step"): a flat shard has one, so they
// must agree (a checkpoint where some parameters of a unit never stepped cannot be sharded).
double ZeroEngine::unit_step(const Unit& u, const std::map<std::string, double>& scalars) const {
  std::optional<double> step;
  for (const auto& [name, param] : u.plan.params) {
    auto it = scalars.find(name + ".step");
    double s = it == scalars.end() ? 0.0 : it->second;
    COHORT_CHECK_ARG(!step || *step == s, "zero: the checkpoint's step counts of '",
                     u.plan.params[0].first, "' (", *step, ") and '", name, "' (", s,
                     ") differ; parameters of one unit (", unit_key(u), ") are stepped together");
    step = s;
  }
  return step.value_or(0.0);
}

// Slot `slot` of this rank's shard of unit u, read from the checkpoint (zeros where the
// padding is); nullopt when the checkpoint holds that slot for none of the unit's parameters.
std::optional<Tensor> ZeroEngine::read_slot(const ckpt::ShardedView& view, const Unit& u,
                                            const std::string& slot) const {
  const int64_t shard_begin = rank_ * u.layout.shard_size();
  Tensor out = zeros({u.layout.shard_size()});
  bool any = false;
  for (const ckpt::FlatPiece& p : u.layout.pieces_of_shard(rank_)) {
    const auto& [name, param] = u.plan.params[p.index];
    const std::string key = name + "." + slot;
    if (!view.has("optimizer", key)) continue;
    COHORT_CHECK_ARG(view.shape("optimizer", key) == param.shape(),
                     "checkpoint: optimizer tensor '", key, "' has shape ",
                     shape_str(view.shape("optimizer", key)), ", the model's parameter '", name,
                     "' has ", shape_str(param.shape()), " (a checkpoint of another model?)");
    range_of(out, p.flat_begin - shard_begin, p.end - p.begin)
        .copy_(view.read("optimizer", key, p.begin, p.end));
    any = true;
  }
  if (!any) return std::nullopt;
  return out;
}

void ZeroEngine::load_optimizer(const ckpt::ShardedView& view,
                                const std::map<std::string, double>& scalars) {
  optim::OptimizerState st;
  for (const Unit& u : units_) {
    double step = unit_step(u, scalars);
    if (step > 0) st.scalars[unit_key(u) + ".step"] = step;
    for (const std::string& slot : shard_opt_->slot_names()) {
      if (auto t = read_slot(view, u, slot)) st.tensors[unit_key(u) + "." + slot] = *t;
    }
  }
  if (auto it = scalars.find("lr"); it != scalars.end()) st.scalars["lr"] = it->second;
  shard_opt_->import_state(st);
}

void ZeroEngine::load_model(const nn::StateDict& state) {
  drain();
  for (Unit& u : units_) {
    if (u.flat.impl().storage->released()) {
      u.flat.impl().storage->reacquire();
      u.flat.zero_();  // the padding
    }
  }
  model_.load_state_dict(state);
  if (options_.stage != 3) return;
  autograd::NoGradGuard no_grad;
  for (Unit& u : units_) {
    const int64_t S = u.layout.shard_size();
    u.shard.copy_(range_of(u.flat, rank_ * S, S));
    u.gathered = true;
  }
  if (!hold_) release_idle();
}

}  // namespace cohort::parallel
