#include "cohort/train/world.h"

#include "cohort/comm/communicator.h"
#include "cohort/comm/cost_model.h"
#include "cohort/core/logging.h"
#ifdef COHORT_HAVE_MPI
#include "cohort/comm/backends/mpi/mpi_process_group.h"
#endif

namespace cohort::train {
namespace {

using Millis = std::chrono::milliseconds;

int env_int(const rendezvous::EnvMap& env, const char* key, int fallback) {
  auto it = env.find(key);
  if (it == env.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    COHORT_CHECK_ARG(false, "environment: ", key, "='", it->second, "' is not an integer");
  }
  return fallback;
}

Millis comm_timeout(const Config& cfg) {
  return Millis(int64_t(cfg.get_float("comm.timeout_s") * 1000.0));
}

// The one place that knows whether this build has the MPI backend.
std::shared_ptr<comm::ProcessGroup> mpi_group(const Config& cfg) {
#ifdef COHORT_HAVE_MPI
  comm::MpiOptions o;
  o.timeout = comm_timeout(cfg);
  return comm::make_mpi_process_group(o);
#else
  COHORT_CHECK_ARG(false,
                   "config: comm.backend = \"mpi\", but this cohort was built without "
                   "MPI (install libopenmpi-dev and rebuild), or use comm.backend = "
                   "\"native\"");
  return nullptr;
#endif
}

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

std::shared_ptr<comm::ProcessGroup> native_group(const Config& cfg, TrainWorld& w,
                                                 const rendezvous::EnvMap& env) {
  comm::JoinOptions o;
  o.timeout = comm_timeout(cfg);
  o.bind_address = cfg.get_string("comm.bind_address");
  o.advertise_address = cfg.get_string("comm.advertise_address");
  w.native = comm::join_world(env, o);
  w.rank = w.native->rank;
  w.size = w.native->size;
  w.local_size = w.native->local_size;
  if (w.size == 1) return nullptr;  // a job of one: no gradients to average
  calibrate(cfg, *w.native->comm, env);
  return w.native->group;
}

}  // namespace

std::unique_ptr<TrainWorld> join_world(const Config& cfg, const rendezvous::EnvMap& env) {
  auto w = std::make_unique<TrainWorld>();
  w->restart_count = env_int(env, "COHORT_RESTART_COUNT", 0);
  if (cfg.get_string("comm.backend") == "mpi") {
    w->group = mpi_group(cfg);
    w->rank = w->group->rank();
    w->size = w->group->size();
    w->local_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    return w;
  }
  if (!rendezvous::has_launcher_environment(env)) return w;
  w->group = native_group(cfg, *w, env);
  return w;
}

}  // namespace cohort::train
