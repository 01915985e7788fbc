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

// Whether a launcher described a job in `env` (any of bootstrap.h's conventions).
bool launched(const rendezvous::EnvMap& env) {
  for (const char* k : {"COHORT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"})
    if (env.count(k)) return true;
  return false;
}

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
                                                 const rendezvous::WorldInfo& info,
                                                 const rendezvous::EnvMap& env) {
  rendezvous::WorldStoreOptions so;
  so.host = env_int(env, "COHORT_STORE_EXTERNAL", 0) ? rendezvous::StoreHost::kExternal
                                                     : rendezvous::StoreHost::kRank0;
  so.timeout = so.connect_timeout = comm_timeout(cfg);
  w.store = rendezvous::connect_world_store(info, so);
  comm::CommOptions co;
  co.device.secret = info.secret;
  co.device.bind_address = cfg.get_string("comm.bind_address");
  co.device.advertise_address = cfg.get_string("comm.advertise_address");
  co.timeout = co.connect_timeout = comm_timeout(cfg);
  co.prefix = "train";
  auto c = comm::Communicator::create(w.store.store, info.rank, info.world_size, co);
  calibrate(cfg, *c, env);
  return comm::make_process_group(std::move(c));
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
  if (!launched(env)) return w;
  rendezvous::WorldInfo info = rendezvous::world_from_env(env);
  w->rank = info.rank;
  w->size = info.world_size;
  w->local_size = info.local_world_size;
  if (info.world_size > 1) w->group = native_group(cfg, *w, info, env);
  return w;
}

}  // namespace cohort::train
