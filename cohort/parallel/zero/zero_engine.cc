// ZeroEngine set-up, the optimizer step and clipping (zero_engine.h); gradients are in
// zero_grads.cc, stage 3's gathering in zero_gather.cc.
#include "cohort/parallel/zero/zero_engine.h"

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/optim/clip.h"
#include "cohort/parallel/param_sync.h"

namespace cohort::parallel {
namespace {

Tensor flat_f32(int64_t n) {
  return zeros({n}, DType::f32);
}
}  // namespace

ZeroEngine::ZeroEngine(nn::Module& model, const optim::Optimizer& user_optimizer,
                       std::shared_ptr<comm::ProcessGroup> group, ZeroOptions options)
    : model_(model), group_(std::move(group)), options_(options) {
  COHORT_CHECK_ARG(options.stage >= 1 && options.stage <= 3, "zero.stage = ", options.stage,
                   " is not 1, 2 or 3");
  COHORT_CHECK_ARG(options.unit_mb > 0, "zero.unit_mb must be > 0, got ", options.unit_mb);
  if (group_) {
    world_ = group_->size();
    rank_ = group_->rank();
    verify_same_structure(*group_, model.named_parameters(), options_.timeout);
    broadcast_from_rank0(*group_, model.named_buffers(), options_.timeout);
  }
  for (const auto& [name, t] : model.named_parameters()) {
    COHORT_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous() && t.offset() == 0,
                     "zero: parameter '", name, "' must be a contiguous float32 tensor");
  }
  auto max_numel = int64_t(options.unit_mb * double(1 << 20) / 4);
  std::optional<std::string> shared;
  std::vector<UnitPlan> plans = plan_units(model, std::max<int64_t>(1, max_numel), &shared);
  // Stage 3 frees a unit's parameters outside its module: a parameter another unit's module
  // also uses would be read while freed.
  COHORT_CHECK_ARG(options.stage != 3 || !shared, "zero.stage = 3: parameter '", *shared,
                   "' is shared by modules of two units (tied weights); raise zero.unit_mb so "
                   "that both modules fall in one unit, or use stage 1 or 2");
  for (UnitPlan& p : plans) build_unit(std::move(p));
  make_shard_optimizer(user_optimizer);
  make_grads();
}

ZeroEngine::~ZeroEngine() {
  drain();
}

void ZeroEngine::build_unit(UnitPlan plan) {
  std::vector<int64_t> numels;
  for (const auto& [name, t] : plan.params) numels.push_back(t.numel());
  Unit u;
  u.layout = ckpt::FlatLayout(numels, world_);
  u.plan = std::move(plan);
  u.flat = flat_f32(u.layout.shard_size() * world_);
  shard_parameters(u);
  units_.push_back(std::move(u));
}

// Moves the unit's parameters into its flat buffer (each parameter becomes a view of it, so
// every handle to it — the model's, the optimizer's — sees the buffer), with rank 0's values.
void ZeroEngine::shard_parameters(Unit& u) {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < u.plan.params.size(); ++i) {
    Tensor& p = u.plan.params[i].second;
    range_of(u.flat, u.layout.offset(i), p.numel()).copy_(p);
    TensorImpl& impl = p.impl();
    impl.storage = u.flat.impl().storage;
    impl.offset = u.layout.offset(i);
  }
  if (group_) {
    group_->broadcast({.buffer = u.flat.raw_data(),
                       .count = size_t(u.flat.numel()),
                       .timeout = options_.timeout});
  }
  const int64_t S = u.layout.shard_size();
  if (redundant()) u.buddy = range_of(u.flat, buddy_rank() * S, S).clone_raw();  // rank 0's
  if (options_.stage == 3) {
    u.shard = range_of(u.flat, rank_ * S, S).clone_raw();
    u.flat.impl().storage->release();
    u.gathered = false;
  } else {
    u.shard = range_of(u.flat, rank_ * S, S);
  }
  if (options_.stage == 1) {
    u.flat_grad = flat_f32(S * world_);
    u.shard_grad = range_of(u.flat_grad, rank_ * S, S);
  } else {
    u.flat_grad = flat_f32(S * world_);
    u.flat_grad.impl().storage->release();  // taken when the unit's first gradient arrives
    u.shard_grad = flat_f32(S);
  }
  u.shard.set_requires_grad(true);
  u.shard.set_grad(u.shard_grad);
  if (redundant()) {
    // Stage 1's averaged gradient is the whole flat buffer; stages 2, 3 receive it (the owner
    // passes it on: hand_off_shard_grads).
    u.buddy_grad = options_.stage == 1 ? range_of(u.flat_grad, buddy_rank() * S, S) : flat_f32(S);
    u.buddy.set_requires_grad(true);
    u.buddy.set_grad(u.buddy_grad);
  }
  for (const Tensor& t : {u.flat, u.shard, u.buddy})
    if (t.defined()) tag_memory(t, MemoryKind::kParameters);
  for (const Tensor& t : {u.flat_grad, u.shard_grad, u.buddy_grad})
    if (t.defined()) tag_memory(t, MemoryKind::kGradients);
}

void ZeroEngine::make_shard_optimizer(const optim::Optimizer& user_optimizer) {
  optim::NamedParams shards;
  for (const Unit& u : units_) shards.emplace_back(unit_key(u), u.shard);
  shard_opt_ = user_optimizer.make_like(std::move(shards));
  if (!redundant()) return;
  optim::NamedParams buddies;
  for (const Unit& u : units_) buddies.emplace_back(unit_key(u), u.buddy);
  buddy_opt_ = user_optimizer.make_like(std::move(buddies));
}

double ZeroEngine::clip_grad_norm(double max_norm) {
  COHORT_CHECK_ARG(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  std::vector<Tensor> shards;
  for (const Unit& u : units_) shards.push_back(u.shard);
  double local = optim::grad_norm(shards);
  double sum_sq = local * local;
  if (group_) {
    group_->allreduce(
        {.output = &sum_sq, .count = 1, .dtype = comm::DType::f64, .timeout = options_.timeout});
  }
  double total = std::sqrt(sum_sq);
  double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || !std::isfinite(total)) {
    // Stage 1 scales the whole flat gradient so that every .grad view stays consistent.
    std::vector<Tensor> grads;
    for (const Unit& u : units_) {
      grads.push_back(options_.stage == 1 ? u.flat_grad : u.shard_grad);
      if (redundant() && options_.stage != 1) grads.push_back(u.buddy_grad);
    }
    optim::scale_tensors(grads, coef);
  }
  return total;
}

void ZeroEngine::step(double lr) {
  shard_opt_->set_lr(lr);
  shard_opt_->step();
  if (buddy_opt_) {  // the same update of the neighbour's shard, from the same inputs
    buddy_opt_->set_lr(lr);
    buddy_opt_->step();
  }
  if (options_.stage < 3) {
    update_unfinished_ = true;
    allgather_parameters();
    update_unfinished_ = false;
  } else {
    release_idle();  // a unit gathered before the step holds the old values
  }
}

void ZeroEngine::allgather_parameters() {
  if (!group_) return;
  auto start = Clock::now();
  std::vector<comm::Work> works;
  works.reserve(units_.size());
  for (Unit& u : units_) {
    works.push_back(group_->allgather_async({.input = nullptr,
                                             .output = u.flat.raw_data(),
                                             .count = size_t(u.layout.shard_size()),
                                             .timeout = options_.timeout}));
  }
  for (auto& w : works) w.wait();
  double s = std::chrono::duration<double>(Clock::now() - start).count();
  comm_s_ += s;
  exposed_s_ += s;
}

void ZeroEngine::zero_grad() {
  for (Unit& u : units_) {
    for (size_t i = 0; i < u.plan.params.size(); ++i) {
      Tensor& p = u.plan.params[i].second;
      // Stage 1: a .grad that is the unit's buffer stays, zeroed with it.
      if (options_.stage == 1 && p.grad().defined() &&
          p.grad().impl().storage == u.flat_grad.impl().storage) {
        continue;
      }
      p.set_grad(Tensor());
    }
    if (options_.stage == 1) u.flat_grad.zero_();
  }
}

void ZeroEngine::abandon_pass() noexcept {
  grads_->end_pass();
  drain();
  for (Unit& u : units_) {
    if (options_.stage != 1) u.flat_grad.impl().storage->release();
    if (options_.stage == 3 && u.in_use == 0 && !hold_) {
      u.flat.impl().storage->release();
      u.gathered = false;
    }
  }
}

void ZeroEngine::drain() noexcept {
  for (size_t k = 0; k < units_.size(); ++k) {
    for (comm::Work* w : {&units_[k].gather, &reduction(k)}) {
      try {
        if (w->valid()) w->wait();
      } catch (...) {
      }
      *w = comm::Work();
    }
  }
}

}  // namespace cohort::parallel
