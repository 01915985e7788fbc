// ZeroEngine's gradients (zero_engine.h), a policy on the bucketing engine (bucketing.h): each
// unit's flat gradient is a bucket, filled as backward produces its parameters' gradients and
// reduced as soon as it is complete, in a fixed order (the last unit first: backward's order),
// so every rank issues the same collectives in the same order. The end-of-backward callback
// reduces what is left and waits for every reduction.
#include "cohort/autograd/node.h"
#include "cohort/parallel/zero/zero_engine.h"

namespace cohort::parallel {
namespace {

Tensor slot_of(const ZeroEngine::Unit& u, size_t i) {
  const Tensor& p = u.plan.params[i].second;
  return u.flat_grad.as_strided(p.shape(), contiguous_strides(p.shape()), u.layout.offset(i));
}

}  // namespace

void ZeroEngine::make_grads() {
  GradBucketing::Policy policy{
      .take = [this](size_t p) { take_grad(units_[param_at_[p].first], param_at_[p].second); },
      .launch = [this](size_t b) { return launch(unit_of_bucket(b)); },
      .after_hook =
          [this] {
            if (options_.stage != 1) free_reduced();
          },
      .end_of_backward = [this] { finalize(); }};
  grads_ = std::make_shared<GradBucketing>(GradBucketing::Order::fixed,
                                           GradBucketing::Start::first_hook, std::move(policy));
  std::vector<std::vector<size_t>> bucket_of;
  for (size_t k = 0; k < units_.size(); ++k) {
    for (size_t i = 0; i < units_[k].plan.params.size(); ++i) {
      param_at_.emplace_back(k, i);
      bucket_of.push_back({units_.size() - 1 - k});
    }
  }
  grads_->set_plan(ReadyCounter(std::move(bucket_of), units_.size()));
}

void ZeroEngine::install() {
  std::vector<Tensor> tensors;
  for (const auto& [k, i] : param_at_) tensors.push_back(units_[k].plan.params[i].second);
  grads_->install(tensors);
  if (options_.stage == 3) install_scopes();
}

// Stages 2, 3: at most kMaxReductionsInFlight flat gradients wait for their reduction while
// backward fills the next one, or a slow network would let every unit's full gradient pile up
// (as FSDP limits its all-gathers in flight).
void ZeroEngine::bound_reductions_in_flight() {
  free_reduced();
  while (grads_->num_launched() - grads_->num_done() >= kMaxReductionsInFlight) {
    auto start = Clock::now();
    grads_->work(grads_->oldest_running()).wait();
    exposed_s_ += std::chrono::duration<double>(Clock::now() - start).count();
    free_reduced();
  }
}

// Stages 2, 3: a unit whose reduction is done needs its flat gradient no more; freeing it
// during backward keeps at most the units in flight, not every unit, in memory.
void ZeroEngine::free_reduced() {
  grads_->poll([this](size_t b) {
    comm::Work& w = grads_->work(b);
    if (w.valid()) w.wait();  // done: rethrows its error, if any
    w = comm::Work();
    unit_of_bucket(b).flat_grad.impl().storage->release();
  });
}

// Redundant stages 2, 3, once every unit is reduced: each rank passes its shards' averaged
// gradients to their keeper (rank - 1) and receives its neighbour's (rank + 1), every unit in
// one batch, in unit order on every rank (a pass per unit as each reduction completed would
// interleave with the next reductions in an order that differs between ranks). The keeper then
// steps the copy on the owner's very bits. 1/N of the gradient's bytes, after the N-1/N of the
// reduce-scatter: less than an allreduce's 2(N-1)/N.
void ZeroEngine::hand_off_shard_grads() {
  if (!redundant() || options_.stage == 1) return;
  constexpr uint32_t kHandoffTag = 0x5a0e;
  const int keeper = (rank_ + world_ - 1) % world_;
  std::vector<comm::P2POp> ops;
  for (Unit& u : units_) {
    const size_t n = size_t(u.layout.shard_size());
    ops.push_back(
        {comm::P2POp::kSend, u.shard_grad.raw_data(), n, DType::f32, keeper, kHandoffTag});
    ops.push_back(
        {comm::P2POp::kRecv, u.buddy_grad.raw_data(), n, DType::f32, buddy_rank(), kHandoffTag});
  }
  const auto start = Clock::now();
  group_->batch_send_recv(ops, options_.timeout);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  comm_s_ += s;
  exposed_s_ += s;
}

// Copies the parameter's gradient into its slot of the unit's flat gradient. Stage 1 keeps the
// slot as .grad (the averaged gradient lands there); stages 2 and 3 drop .grad to free it.
void ZeroEngine::take_grad(Unit& u, size_t index) {
  Storage& storage = *u.flat_grad.impl().storage;
  if (storage.released()) {
    if (options_.stage != 1) bound_reductions_in_flight();
    storage.reacquire();
    u.flat_grad.zero_();
  }
  Tensor& p = u.plan.params[index].second;
  Tensor slot = slot_of(u, index);
  Tensor g = p.grad();
  if (!is_bucket_slot(g, slot)) {
    autograd::NoGradGuard no_grad;
    if (g.defined()) {
      slot.copy_(g);
    } else {
      slot.zero_();  // unused this pass: it contributes zero
    }
  }
  p.set_grad(options_.stage == 1 ? slot : Tensor());
}

comm::Work ZeroEngine::launch(Unit& u) {
  const auto S = size_t(u.layout.shard_size());
  if (grads_->num_launched() == 0) first_launch_ = Clock::now();
  if (!group_) {
    if (options_.stage != 1) u.shard_grad.copy_(u.flat_grad);
    return {};
  }
  if (options_.stage == 1) {
    return group_->allreduce_async({.output = u.flat_grad.raw_data(),
                                    .count = S * size_t(world_),
                                    .op = comm::ReduceOp::avg,
                                    .timeout = options_.timeout});
  }
  return group_->reduce_scatter_async({.input = u.flat_grad.raw_data(),
                                       .output = u.shard_grad.raw_data(),
                                       .count = S,
                                       .op = comm::ReduceOp::avg,
                                       .timeout = options_.timeout});
}

// End of a synchronized backward: parameters that got no gradient count as zero, the rest of
// the units are reduced, and every reduction is waited for (the exposed communication).
void ZeroEngine::finalize() {
  grads_->end_pass();
  for (size_t p = 0; p < param_at_.size(); ++p) grads_->mark_ready(p);  // skips the ready ones
  grads_->launch_ready();
  wait_reductions();
  if (options_.stage == 3) release_idle();  // a prefetch the pass did not use
}

void ZeroEngine::wait_reductions() {
  auto start = Clock::now();
  for (size_t k = 0; k < units_.size(); ++k) {
    comm::Work& w = reduction(k);
    if (w.valid()) w.wait();
    w = comm::Work();
    if (options_.stage != 1) units_[k].flat_grad.impl().storage->release();
  }
  auto end = Clock::now();
  exposed_s_ += std::chrono::duration<double>(end - start).count();
  // The reductions ran from the first launch to (at most) now: their span, as DDP's comm_s.
  comm_s_ += std::chrono::duration<double>(end - first_launch_).count();
  hand_off_shard_grads();
}

}  // namespace cohort::parallel
