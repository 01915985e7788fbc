#include "cohort/train/elastic_strategy.h"

#include "cohort/parallel/decentralized/gossip_strategy.h"
#include "cohort/parallel/decentralized/local_sgd_strategy.h"
#include "cohort/parallel/flat_average.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/parallel/zero/zero_strategy.h"
#include "cohort/train/straggler.h"

namespace cohort::train {
namespace {

// The strategy's own step count (local_sgd, gossip), or -1.
int64_t strategy_steps(parallel::Strategy& strategy) {
  if (auto* local = dynamic_cast<parallel::LocalSgdStrategy*>(&strategy)) return local->steps();
  if (auto* gossip = dynamic_cast<parallel::GossipStrategy*>(&strategy)) return gossip->steps();
  return -1;
}

void set_strategy_steps(parallel::Strategy& strategy, int64_t steps) {
  // local_sgd: its checkpoint state is the step count, and a load is a synchronization point.
  if (auto* local = dynamic_cast<parallel::LocalSgdStrategy*>(&strategy))
    local->load_state({{}, {{"steps", steps}}, false});
  if (auto* gossip = dynamic_cast<parallel::GossipStrategy*>(&strategy)) gossip->set_steps(steps);
}

parallel::ZeroEngine* zero_engine(parallel::Strategy& strategy) {
  auto* zero = dynamic_cast<parallel::ZeroStrategy*>(&strategy);
  return zero ? &zero->engine() : nullptr;
}

}  // namespace

bool recovers_in_place(const std::string& strategy) {
  return strategy == "ddp" || strategy == "zero" || strategy == "local_sgd" || strategy == "gossip";
}

bool replicas_part(const Trainer::State& s) {
  const std::string name = s.cfg.get_string("parallel.strategy");
  return name == "local_sgd" || name == "gossip";
}

void complete_interrupted_step(Trainer::State& s) {
  // A failure while a new world made its strategy (a join) leaves none: nothing was stepped.
  COHORT_CHECK_IO(s.strategy != nullptr, "elastic: the workers failed while forming generation ",
                  s.elastic_generation, "'s strategy; the job stops (--max-restarts restarts it ",
                  "from the last checkpoint)");
  parallel::ZeroEngine* zero = zero_engine(*s.strategy);
  const bool updated =
      replicas_part(s) ? strategy_steps(*s.strategy) > s.step : zero && zero->update_unfinished();
  if (!updated) return;
  ++s.step;
  s.pos.batch_in_epoch += s.grad_accum;
}

void average_parted_replicas(Trainer::State& s) {
  if (!replicas_part(s)) return;
  std::vector<Tensor> replica = s.model->parameters();
  for (const auto& [name, b] : s.model->named_buffers())
    if (b.dtype() == DType::f32) replica.push_back(b);
  const auto timeout = std::chrono::milliseconds(int64_t(s.cfg.get_float("comm.timeout_s") * 1e3));
  parallel::FlatAverager(*s.world->group, "elastic: replicas", timeout).average(replica);
}

void gather_sharded_state(Trainer::State& s, const std::vector<int>& members) {
  if (parallel::ZeroEngine* zero = zero_engine(*s.strategy))
    s.opt->import_state(zero->consolidate(*s.world->group, members));
}

void after_new_strategy(Trainer::State& s) {
  // zero: the full optimizer state gathered before (or received from rank 0) goes into the
  // new shards; the user's optimizer keeps none of it (it is never stepped under zero).
  if (parallel::ZeroEngine* zero = zero_engine(*s.strategy)) {
    zero->load_full_optimizer(s.opt->export_state());
    s.opt->import_state({{}, {{"lr", s.opt->lr()}}});
  }
  // Its step count: the warm-up, the period, the codec's rounds go on where they were.
  if (replicas_part(s)) set_strategy_steps(*s.strategy, s.step);
}

void rebuild_strategy(Trainer::State& s, bool average_replicas) {
  s.strategy->shutdown();  // what the old world had in flight (failed) is waited for
  s.strategy.reset();      // unhooks the old DDP from the model before the new one hooks it
  if (average_replicas) average_parted_replicas(s);
  std::shared_ptr<rendezvous::Store> store = s.world->joined->store.store;
  s.strategy = parallel::make_strategy(
      s.cfg.get_string("parallel.strategy"),
      {*s.model, *s.opt, s.world->group, s.cfg, store, &s.env, s.total_steps, s.world->rank,
       s.world->size, s.world->worker_restarts, nullptr});
  after_new_strategy(s);
  s.stragglers = StragglerWatch(straggler_options(s.cfg), s.world->group);
}

}  // namespace cohort::train
