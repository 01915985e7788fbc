#include "cohort/train/world.h"

#include "cohort/comm/communicator.h"
#include "cohort/comm/cost_model.h"
#include "cohort/core/logging.h"

namespace cohort::train {
namespace {

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
  o.store_only = cfg.get_string("parallel.strategy") == "ps";  // workers talk to servers only
  bool mpi = o.backend == "mpi";
  // Native without launcher variables: a job of one, nothing to join.
  if (!mpi && !rendezvous::has_launcher_environment(env)) return w;
  w->joined = comm::join_world(env, o);
  w->rank = w->joined->rank;
  w->size = w->joined->size;
  if (o.store_only) return w;
  if (!mpi && w->size == 1) return w;  // a job of one: no gradients to average
  if (w->joined->comm) calibrate(cfg, *w->joined->comm, env);
  w->group = w->joined->group;
  return w;
}

}  // namespace cohort::train
