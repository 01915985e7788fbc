// Stage 3 of ZeroEngine (zero_engine.h): a unit's full parameters exist only while its module
// runs. Each unit module carries an autograd scope (autograd/scope.h) whose observer is told
// when the module's forward starts and ends, and when backward enters and leaves the module's
// part of the graph. Entering gathers the unit (waiting for a prefetch already started) and
// starts gathering the unit expected next (the following one in forward, the preceding one in
// backward); leaving frees the flat buffer. Saved tensors of the graph are views of that
// buffer: they see the values again once backward gathers it.
#include "cohort/parallel/zero/zero_engine.h"

namespace cohort::parallel {

class ZeroEngine::Gatherer : public autograd::ScopeObserver {
 public:
  explicit Gatherer(ZeroEngine& engine) : engine_(engine) {}
  void begin(const autograd::Scope& scope, autograd::Pass pass) override {
    if (auto it = engine_.unit_of_module_.find(scope.name); it != engine_.unit_of_module_.end())
      engine_.use_unit(it->second, pass);
    if (auto next = chained(scope)) next->begin(scope, pass);
  }
  void end(const autograd::Scope& scope, autograd::Pass pass) override {
    if (auto next = chained(scope)) next->end(scope, pass);
    if (auto it = engine_.unit_of_module_.find(scope.name); it != engine_.unit_of_module_.end())
      engine_.done_with_unit(it->second);
  }
  // The observer a module's scope had before ours (the trainer's timeline trace).
  std::unordered_map<std::string, std::weak_ptr<autograd::ScopeObserver>> previous;

 private:
  std::shared_ptr<autograd::ScopeObserver> chained(const autograd::Scope& scope) const {
    auto it = previous.find(scope.name);
    return it == previous.end() ? nullptr : it->second.lock();
  }
  ZeroEngine& engine_;
};

void ZeroEngine::install_scopes() {
  gatherer_ = std::make_shared<Gatherer>(*this);
  chain_scope_observers();
}

void ZeroEngine::chain_scope_observers() {
  if (!gatherer_) return;
  for (size_t k = 0; k < units_.size(); ++k) {
    nn::Module& m = *units_[k].plan.module;
    const std::string& name = units_[k].plan.name;
    unit_of_module_[name] = k;
    if (const auto& old = m.trace_scope()) {
      auto observer = old->observer.lock();
      if (observer && observer != gatherer_) gatherer_->previous[name] = observer;
      if (observer == gatherer_) continue;
    }
    m.set_trace_scope(std::make_shared<autograd::Scope>(
        autograd::Scope{name, nullptr, std::weak_ptr<autograd::ScopeObserver>(gatherer_)}));
  }
}

void ZeroEngine::use_unit(size_t unit, autograd::Pass pass) {
  Unit& u = units_[unit];
  if (!u.gathered) {
    if (!u.gather.valid()) start_gather(u);
    finish_gather(u);
  }
  ++u.in_use;
  if (!options_.prefetch) return;
  bool forward = pass == autograd::Pass::forward;
  if (forward ? unit + 1 < units_.size() : unit > 0) {
    Unit& next = units_[forward ? unit + 1 : unit - 1];
    if (!next.gathered && !next.gather.valid()) start_gather(next);
  }
}

void ZeroEngine::done_with_unit(size_t unit) {
  Unit& u = units_[unit];
  if (u.in_use > 0 && --u.in_use > 0) return;
  if (!hold_) release(u);
}

void ZeroEngine::hold_gathered() {
  if (options_.stage != 3) return;
  gather_all();
  hold_ = true;
}

void ZeroEngine::start_gather(Unit& u) {
  u.flat.impl().storage->reacquire();
  const auto S = size_t(u.layout.shard_size());
  if (!group_) {
    u.flat.copy_(u.shard);
    u.gathered = true;
    return;
  }
  u.gather = group_->allgather_async({.input = u.shard.raw_data(),
                                      .output = u.flat.raw_data(),
                                      .count = S,
                                      .timeout = options_.timeout});
}

void ZeroEngine::finish_gather(Unit& u) {
  if (u.gather.valid()) {
    auto start = Clock::now();
    u.gather.wait();
    exposed_s_ += std::chrono::duration<double>(Clock::now() - start).count();
    u.gather = comm::Work();
  }
  u.gathered = true;
}

void ZeroEngine::release(Unit& u) {
  if (u.gather.valid()) finish_gather(u);  // never free a buffer a collective writes
  u.flat.impl().storage->release();
  u.gathered = false;
}

void ZeroEngine::release_idle() {
  if (hold_) return;
  for (Unit& u : units_) {
    if (u.in_use == 0 && (u.gathered || u.gather.valid())) release(u);
  }
}

void ZeroEngine::gather_all() {
  if (options_.stage != 3) return;
  for (Unit& u : units_) {
    if (!u.gathered && !u.gather.valid()) start_gather(u);
  }
  for (Unit& u : units_) finish_gather(u);
}

}  // namespace cohort::parallel
