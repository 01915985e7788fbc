// ZeroEngine's optimizer state in checkpoints (zero_engine.h): the shard optimizer steps one
// flat tensor per unit, but a checkpoint speaks of each parameter's slots ("<param>.<slot>" of
// the parameter's shape) as the plain optimizer names them. Saving cuts each unit's slot along
// the unit's layout into the parameters' pieces this rank holds; loading reads back, from a
// checkpoint of any layout, the element ranges of this rank's shard.
#include "cohort/autograd/node.h"
#include "cohort/parallel/zero/zero_engine.h"

namespace cohort::parallel {

std::vector<ckpt::TensorPiece> ZeroEngine::optimizer_pieces() const {
  const optim::OptimizerState st = shard_opt_->export_state();
  std::vector<ckpt::TensorPiece> out;
  for (const Unit& u : units_) {
    const int64_t shard_begin = u.layout.shard(rank_).begin;
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
  std::map<std::string, double> out{{"lr", shard_opt_->lr()}};
  for (size_t k = 0; k < units_.size(); ++k) {
    const int64_t step = shard_opt_->step_count(k);  // the shard optimizer's parameter k: unit k
    if (step == 0) continue;
    for (const auto& [name, param] : units_[k].plan.params) out[name + ".step"] = double(step);
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
                                            const std::string& slot, int rank) const {
  const int64_t shard_begin = u.layout.shard(rank).begin;
  Tensor out = zeros({u.layout.shard_size()});
  bool any = false;
  for (const ckpt::FlatPiece& p : u.layout.pieces_of_shard(rank)) {
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
  // A shard that is all padding (a unit smaller than the world's shards) holds zeros.
  if (!any && !u.layout.pieces_of_shard(rank).empty()) return std::nullopt;
  return out;
}

// The shard optimizer's state of rank `rank`'s shards.
optim::OptimizerState ZeroEngine::shard_state(const ckpt::ShardedView& view,
                                              const std::map<std::string, double>& scalars,
                                              int rank) const {
  optim::OptimizerState st;
  for (const Unit& u : units_) {
    double step = unit_step(u, scalars);
    if (step > 0) st.scalars[unit_key(u) + ".step"] = step;
    for (const std::string& slot : shard_opt_->slot_names()) {
      if (auto t = read_slot(view, u, slot, rank)) st.tensors[unit_key(u) + "." + slot] = *t;
    }
  }
  if (auto it = scalars.find("lr"); it != scalars.end()) st.scalars["lr"] = it->second;
  return st;
}

void ZeroEngine::load_optimizer(const ckpt::ShardedView& view,
                                const std::map<std::string, double>& scalars) {
  shard_opt_->import_state(shard_state(view, scalars, rank_));
  if (buddy_opt_) buddy_opt_->import_state(shard_state(view, scalars, buddy_rank()));
}

void ZeroEngine::load_full_optimizer(const optim::OptimizerState& state) {
  ckpt::CheckpointData whole;
  for (const auto& [name, t] : state.tensors) whole.optimizer.emplace_back(name, t);
  load_optimizer(ckpt::ShardedView(whole), state.scalars);
}

// Stages 1 and 2 hold every parameter in its unit's buffer: the module loads them. Stage 3
// checks the whole dict first (all-or-nothing, as Module::load_state_dict), then fills one unit
// at a time, so that a resume holds one unit's full parameters beside the dict, not all.
void ZeroEngine::load_model(const nn::StateDict& state) {
  drain();
  if (options_.stage != 3) {
    model_.load_state_dict(state);
    for (Unit& u : units_) copy_buddy_from_flat(u);
    return;
  }
  check_model_state(state);
  nn::StateDict buffers;
  for (const auto& [name, t] : model_.named_buffers()) buffers[name] = state.at(name);
  model_.load_state_dict(buffers, {.strict = false});
  autograd::NoGradGuard no_grad;
  for (Unit& u : units_) {
    const bool was_released = u.flat.impl().storage->released();
    u.flat.impl().storage->reacquire();
    u.flat.zero_();  // the padding
    for (size_t i = 0; i < u.plan.params.size(); ++i) {
      const auto& [name, p] = u.plan.params[i];
      range_of(u.flat, u.layout.offset(i), p.numel()).copy_(state.at(name));
    }
    const int64_t S = u.layout.shard_size();
    u.shard.copy_(range_of(u.flat, rank_ * S, S));
    copy_buddy_from_flat(u);
    if (was_released && !hold_) u.flat.impl().storage->release();
  }
}

// Every parameter and buffer of the model in `state` with its shape, and nothing else; one
// InvalidArgument listing every problem otherwise.
void ZeroEngine::check_model_state(const nn::StateDict& state) const {
  std::string problems;
  std::map<std::string, Shape> want;
  for (const auto& [name, t] : model_.named_parameters()) want[name] = t.shape();
  for (const auto& [name, t] : model_.named_buffers()) want[name] = t.shape();
  for (const auto& [name, shape] : want) {
    auto it = state.find(name);
    if (it == state.end()) {
      problems += detail::str("; missing '", name, "'");
    } else if (it->second.shape() != shape) {
      problems += detail::str("; '", name, "' has shape ", shape_str(it->second.shape()),
                              ", the model's is ", shape_str(shape));
    }
  }
  for (const auto& [name, t] : state) {
    if (!want.count(name)) problems += detail::str("; unexpected '", name, "'");
  }
  COHORT_CHECK_ARG(problems.empty(), model_.type_name(), ": the state does not fit the model",
                   problems);
}

}  // namespace cohort::parallel
