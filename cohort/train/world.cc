#include "cohort/train/world.h"

#include "cohort/comm/communicator.h"
#include "cohort/comm/cost_model.h"
#include "cohort/comm/liveness.h"
#include "cohort/core/logging.h"
#include "cohort/parallel/strategy_registry.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/train/elastic.h"

namespace cohort::train {

// comm.calibrate: α–β of the allreduce cost model, from the cache or measured (cost_model.h).
void calibrate(const Config& cfg, comm::Communicator& c, const rendezvous::EnvMap& env) {
  std::string mode = cfg.get_string("comm.calibrate");
  if (mode == "off") return;
  std::string path = cfg.get_string("comm.cost_model_cache");
  if (path.empty() && env.count("HOME")) path = comm::default_cost_model_cache(env.at("HOME"));
  comm::CalibrationOptions o;
  o.cache_path = path;
  o.force_measure = mode == "always";
  comm::calibrate_cost_model(c, o);
}

namespace {

// The transport's fault seams from the fault.* keys (train/config/registry_health.cc). Every rank
// gets the same values: FaultInjection itself checks which rank stalls or drops; the delay
// applies to fault.delay_rank alone (or everyone).
comm::transport::FaultInjection fault_injection(const Config& cfg, int rank) {
  using Millis = comm::transport::Millis;
  auto ms = [](double v) { return Millis(int64_t(v)); };
  comm::transport::FaultInjection f;
  const int64_t delay_rank = cfg.get_int("fault.delay_rank");
  if (delay_rank < 0 || delay_rank == rank) f.delay = ms(cfg.get_float("fault.delay_ms"));
  f.stall_rank = int(cfg.get_int("fault.stall_rank"));
  f.stall_before_tag = uint64_t(cfg.get_int("fault.stall_at_seq"));
  f.stall_for = ms(cfg.get_float("fault.stall_s") * 1000.0);
  f.drop_rank = int(cfg.get_int("fault.drop_rank"));
  f.drop_peer = int(cfg.get_int("fault.drop_peer"));
  f.drop_after = uint64_t(cfg.get_int("fault.drop_after"));
  return f;
}

// The watchdog's own connection to the store, each call bounded by about detect / 2 (the
// TcpStore waits at least 1 s for an answer): the job's connection waits up to comm.timeout_s,
// and a cut link answers nothing. It connects within the job's window, as the job's did. The
// job's store when no address is known (a test's store).
std::shared_ptr<rendezvous::Store> watchdog_store(const comm::World& joined,
                                                  std::chrono::milliseconds detect) {
  rendezvous::TcpStoreOptions o = joined.store.client;
  if (o.port == 0) return joined.store.store;
  o.timeout = std::max(detect / 2, std::chrono::milliseconds(1));
  return std::make_shared<rendezvous::TcpStore>(std::move(o));
}

}  // namespace

std::unique_ptr<TrainWorld> join_world(const Config& cfg, const rendezvous::EnvMap& env) {
  auto w = std::make_unique<TrainWorld>();
  w->restart_count = rendezvous::int_from_env(env, "COHORT_RESTART_COUNT", 0);
  w->worker_restarts = rendezvous::int_from_env(env, "COHORT_WORKER_RESTARTS", 0);
  comm::JoinOptions o;
  o.backend = cfg.get_string("comm.backend");
  o.timeout = std::chrono::milliseconds(int64_t(cfg.get_float("comm.timeout_s") * 1000.0));
  o.bind_address = cfg.get_string("comm.bind_address");
  o.advertise_address = cfg.get_string("comm.advertise_address");
  // The strategy's world hook: whether its workers form a group or reach services by the store.
  o.store_only = !parallel::strategy_world(cfg.get_string("parallel.strategy")).joins_group;
  // A worker respawned into a running elastic job (`--respawn`): the others formed their group
  // long ago; it connects the store and is admitted at a step boundary (train/elastic_join.h).
  w->joiner = rendezvous::int_from_env(env, "COHORT_ELASTIC_JOIN", 0) == 1;
  o.store_only = o.store_only || w->joiner;
  o.faults = fault_injection(cfg, int(rendezvous::int_from_env(env, "COHORT_RANK", 0)));
  o.flight_recorder_size = size_t(cfg.get_int("comm.flight_recorder_size"));
  bool mpi = o.backend == "mpi";
  // Native without launcher variables: a job of one, nothing to join.
  if (!mpi && !rendezvous::has_launcher_environment(env)) return w;
  w->joined = comm::join_world(env, o);
  w->rank = w->joined->rank;
  w->size = w->joined->size;
  w->data_rank = w->rank;
  w->data_size = w->size;
  w->slots.resize(size_t(w->size));
  for (int r = 0; r < w->size; ++r) w->slots[size_t(r)] = r;
  if (o.store_only) return w;
  if (!mpi && w->size == 1) return w;  // a job of one: no gradients to average
  if (w->joined->comm) calibrate(cfg, *w->joined->comm, env);
  w->group = w->joined->group;
  w->liveness = watch_liveness(cfg, *w, 0);
  return w;
}

// The native backend only: MPI has no abort that leaves the process standing.
std::unique_ptr<comm::Liveness> watch_liveness(const Config& cfg, TrainWorld& w, int generation) {
  const double detect_s = cfg.get_float("elastic.detect_s");
  if (detect_s <= 0 || !w.joined || !w.joined->comm || !w.joined->store.store) return nullptr;
  comm::LivenessOptions o;
  o.detect = std::chrono::milliseconds(int64_t(detect_s * 1000.0));
  // Per attempt (a restarted job's ranks beat afresh) and per generation (new ranks).
  o.prefix = generation == 0 ? detail::str("liveness/attempt", w.restart_count)
                             : detail::str("liveness/attempt", w.restart_count, "/gen", generation);
  if (cfg.get_int("elastic.min_workers") > 0)
    o.round_key = elastic_round_key(w.restart_count, generation + 1);
  w.liveness_prefix = o.prefix;
  return std::make_unique<comm::Liveness>(watchdog_store(*w.joined, o.detect), w.rank, w.size, o,
                                          comm::abort_on_loss(w.joined->comm));
}

}  // namespace cohort::train
