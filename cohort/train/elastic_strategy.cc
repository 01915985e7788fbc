#include "cohort/train/elastic_strategy.h"

#include "cohort/parallel/decentralized/local_sgd_strategy.h"
#include "cohort/parallel/flat_average.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/train/straggler.h"

namespace cohort::train {
namespace {

bool is_local_sgd(const Trainer::State& s) {
  return s.cfg.get_string("parallel.strategy") == "local_sgd";
}

// Every member's parameters and floating-point buffers replaced by their average over the new
// world (a local_sgd replica, as its own average covers it).
void average_replicas(Trainer::State& s) {
  std::vector<Tensor> replica = s.model->parameters();
  for (const auto& [name, b] : s.model->named_buffers())
    if (b.dtype() == DType::f32) replica.push_back(b);
  const auto timeout = std::chrono::milliseconds(int64_t(s.cfg.get_float("comm.timeout_s") * 1e3));
  parallel::FlatAverager(*s.world->group, "elastic: local_sgd replicas", timeout).average(replica);
}

}  // namespace

bool recovers_in_place(const std::string& strategy) {
  return strategy == "ddp" || strategy == "local_sgd";
}

void complete_interrupted_step(Trainer::State& s) {
  auto* local = dynamic_cast<parallel::LocalSgdStrategy*>(s.strategy.get());
  if (local == nullptr || local->steps() <= s.step) return;
  ++s.step;
  s.pos.batch_in_epoch += s.grad_accum;
}

void before_new_strategy(Trainer::State& s) {
  if (is_local_sgd(s)) average_replicas(s);
}

void after_new_strategy(Trainer::State& s) {
  // Its step count: the warm-up and the period go on where they were (the replicas agree now).
  if (is_local_sgd(s)) s.strategy->checkpoint().load_state({{}, {{"steps", s.step}}, false});
}

void rebuild_strategy(Trainer::State& s) {
  s.strategy.reset();  // unhooks the old DDP from the model before the new one hooks it
  before_new_strategy(s);
  std::shared_ptr<rendezvous::Store> store = s.world->joined->store.store;
  s.strategy = parallel::make_strategy(
      s.cfg.get_string("parallel.strategy"),
      {*s.model, *s.opt, s.world->group, s.cfg, store, &s.env, s.total_steps, s.world->rank,
       s.world->size, s.world->worker_restarts, nullptr});
  after_new_strategy(s);
  s.stragglers = StragglerWatch(straggler_options(s.cfg), s.world->group);
}

}  // namespace cohort::train
