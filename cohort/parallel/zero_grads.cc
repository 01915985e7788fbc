// ZeroEngine's gradients (zero_engine.h): each unit's flat gradient is filled as backward
// produces its parameters' gradients and reduced as soon as it is complete, in a fixed order
// (the last unit first: backward's order), so every rank issues the same collectives in the
// same order. The end-of-backward callback reduces what is left and waits for every reduction.
#include "cohort/autograd/engine.h"
#include "cohort/autograd/node.h"
#include "cohort/parallel/zero_engine.h"

namespace cohort::parallel {
namespace {

Tensor slot_of(const ZeroEngine::Unit& u, size_t i) {
  const Tensor& p = u.plan.params[i].second;
  return u.flat_grad.as_strided(p.shape(), contiguous_strides(p.shape()), u.layout.offset(i));
}

bool is_slot(const Tensor& grad, const Tensor& slot) {
  return grad.defined() && grad.impl().storage == slot.impl().storage &&
         grad.offset() == slot.offset();
}

}  // namespace

void ZeroEngine::install() {
  std::weak_ptr<ZeroEngine> weak = weak_from_this();
  for (size_t k = 0; k < units_.size(); ++k) {
    for (size_t i = 0; i < units_[k].plan.params.size(); ++i) {
      units_[k].plan.params[i].second.register_grad_ready_hook([weak, k, i](Tensor&) {
        if (auto self = weak.lock()) self->on_grad_ready(k, i);
      });
    }
  }
  if (options_.stage == 3) install_scopes();
}

void ZeroEngine::on_grad_ready(size_t unit, size_t index) {
  if (!sync_) return;  // accumulation: .grad just sums
  if (!in_pass_) begin_pass();
  Unit& u = units_[unit];
  if (u.ready[index]) return;
  take_grad(u, index);
  u.ready[index] = true;
  if (--u.pending == 0) launch_ready();
  if (options_.stage != 1) free_reduced();
}

// Stages 2, 3: at most kMaxReductionsInFlight flat gradients wait for their reduction while
// backward fills the next one, or a slow network would let every unit's full gradient pile up
// (as FSDP limits its all-gathers in flight).
void ZeroEngine::bound_reductions_in_flight() {
  free_reduced();
  while (next_launch_ - next_free_ >= kMaxReductionsInFlight) {
    auto start = Clock::now();
    units_[units_.size() - 1 - next_free_].reduce.wait();
    exposed_s_ += std::chrono::duration<double>(Clock::now() - start).count();
    free_reduced();
  }
}

// Stages 2, 3: a unit whose reduction is done needs its flat gradient no more; freeing it
// during backward keeps at most the units in flight, not every unit, in memory.
void ZeroEngine::free_reduced() {
  while (next_free_ < next_launch_) {
    Unit& u = units_[units_.size() - 1 - next_free_];
    if (u.reduce.valid() && !u.reduce.done()) return;
    if (u.reduce.valid()) u.reduce.wait();  // done: rethrows its error, if any
    u.reduce = comm::Work();
    u.flat_grad.impl().storage->release();
    ++next_free_;
  }
}

void ZeroEngine::begin_pass() {
  in_pass_ = true;
  next_launch_ = 0;
  next_free_ = 0;
  for (Unit& u : units_) {
    u.pending = u.plan.params.size();
    u.ready.assign(u.pending, false);
  }
  std::weak_ptr<ZeroEngine> weak = weak_from_this();
  autograd::queue_callback([weak] {
    if (auto self = weak.lock()) self->finalize();
  });
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
  if (!is_slot(g, slot)) {
    autograd::NoGradGuard no_grad;
    if (g.defined()) {
      slot.copy_(g);
    } else {
      slot.zero_();  // unused this pass: it contributes zero
    }
  }
  p.set_grad(options_.stage == 1 ? slot : Tensor());
}

void ZeroEngine::launch_ready() {
  while (next_launch_ < units_.size()) {
    Unit& u = units_[units_.size() - 1 - next_launch_];
    if (u.pending != 0) break;
    launch(u);
    ++next_launch_;
  }
}

void ZeroEngine::launch(Unit& u) {
  const auto S = size_t(u.layout.shard_size());
  if (next_launch_ == 0) first_launch_ = Clock::now();
  if (!group_) {
    if (options_.stage != 1) u.shard_grad.copy_(u.flat_grad);
    return;
  }
  if (options_.stage == 1) {
    u.reduce = group_->allreduce_async({.output = u.flat_grad.raw_data(),
                                        .count = S * size_t(world_),
                                        .op = comm::ReduceOp::avg,
                                        .timeout = options_.timeout});
  } else {
    u.reduce = group_->reduce_scatter_async({.input = u.flat_grad.raw_data(),
                                             .output = u.shard_grad.raw_data(),
                                             .count = S,
                                             .op = comm::ReduceOp::avg,
                                             .timeout = options_.timeout});
  }
}

// End of a synchronized backward: parameters that got no gradient count as zero, the rest of
// the units are reduced, and every reduction is waited for (the exposed communication).
void ZeroEngine::finalize() {
  in_pass_ = false;
  for (Unit& u : units_) {
    for (size_t i = 0; i < u.ready.size(); ++i) {
      if (u.ready[i]) continue;
      take_grad(u, i);
      u.ready[i] = true;
      --u.pending;
    }
  }
  launch_ready();
  wait_reductions();
  if (options_.stage == 3) release_idle();  // a prefetch the pass did not use
}

void ZeroEngine::wait_reductions() {
  auto start = Clock::now();
  for (Unit& u : units_) {
    if (u.reduce.valid()) u.reduce.wait();
    u.reduce = comm::Work();
    if (options_.stage != 1) u.flat_grad.impl().storage->release();
  }
  auto end = Clock::now();
  exposed_s_ += std::chrono::duration<double>(end - start).count();
  // The reductions ran from the first launch to (at most) now: their span, as DDP's comm_s.
  comm_s_ += std::chrono::duration<double>(end - first_launch_).count();
}

}  // namespace cohort::parallel
