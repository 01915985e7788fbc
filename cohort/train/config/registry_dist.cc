// Declarations of the distributed-training keys of `cohort train` (parallel and the sections
// of the registered strategies, comm, ckpt; fault and straggler keys are in
// train/config/registry_health.cc):
// part of the registry behind docs/config.md.
#include <mutex>

#include "cohort/parallel/strategy_registry.h"
#include "cohort/ps/ps_strategy.h"
#include "cohort/train/config/train_config.h"

namespace cohort::train {
namespace {

using T = ConfigType;

// Which backend runs the collectives, and the allreduce cost model's calibration
// (comm::calibrate_cost_model in cohort/comm/cost_model.h).
void add_comm_backend_keys(ConfigRegistry& r) {
  r.add({"comm.backend",
         T::kString,
         std::string("native"),
         "Collective backend: cohort's own over shared memory and TCP (`native`), or Open MPI "
         "(`mpi`: launch with mpirun; needs a build with MPI).",
         "",
         {"native", "mpi"}});
  r.add({"comm.calibrate",
         T::kString,
         std::string("cache"),
         "Native backend: the allreduce cost model (alpha-beta) at start-up: `cache` loads it "
         "from `comm.cost_model_cache` and measures (then saves) it only when absent, "
         "`always` measures and saves, `off` keeps the transport's defaults.",
         "",
         {"off", "cache", "always"}});
  r.add({"comm.cost_model_cache", T::kString, std::string(""),
         "File of measured cost models, one entry per world size, transport mix and host "
         "layout. Empty: `~/.cache/cohort/cost_model.json`."});
}

void add_comm_run_keys(ConfigRegistry& r) {
  r.add({"comm.timeout_s",
         T::kFloat,
         300.0,
         "Deadline of every collective and of the rendezvous (a dead or stalled peer becomes an "
         "error naming it after this long).",
         "",
         {},
         0.1});
  r.add({"comm.bind_address", T::kString, std::string("127.0.0.1"),
         "Address the data listener binds. Loopback unless told otherwise; multi-host jobs "
         "set this host's address (or 0.0.0.0 with comm.advertise_address)."});
  r.add({"comm.advertise_address", T::kString, std::string(""),
         "Address published to peers; empty: comm.bind_address."});
  add_comm_backend_keys(r);
}

void add_ckpt_keys(ConfigRegistry& r) {
  r.add({"ckpt.enabled", T::kBool, true,
         "Write checkpoints (at the end of every epoch, of training, and every "
         "ckpt.every_steps)."});
  r.add({"ckpt.every_steps",
         T::kInt,
         int64_t(0),
         "Also checkpoint every N steps. 0: only at epoch ends and the end.",
         "",
         {},
         0.0});
  r.add({"ckpt.dir", T::kString, std::string(""),
         "Checkpoint directory; empty: <run dir>/checkpoints."});
  r.add({"ckpt.keep", T::kInt, int64_t(3), "Newest checkpoints kept; 0 keeps all.", "", {}, 0.0});
  r.add({"ckpt.async", T::kBool, true,
         "Write checkpoints on a background thread so training does not stall."});
  r.add({"run.resume", T::kString, std::string(""),
         "`auto`: continue from the newest checkpoint that verifies (fresh start if none); a "
         "path: that checkpoint directory; empty: fresh start. A restarted worker "
         "(`--max-restarts`) always resumes automatically."});
}

// parallel.strategy, then each registered strategy's own section ([ddp], ...).
void add_strategy_keys(ConfigRegistry& r) {
  // ps/ sits beside parallel/, above it: its strategy is registered here, once.
  static std::once_flag ps_registered;
  std::call_once(ps_registered,
                 [] { parallel::register_strategy(ps::ps_strategy_registration()); });
  std::string names;
  for (const std::string& n : parallel::strategy_names())
    names += (names.empty() ? "`" : ", `") + n + "`";
  r.add({"parallel.strategy", T::kString, std::string(parallel::kDefaultStrategy),
         "How training is distributed, one of the registered strategies (" + names +
             "). `ddp` on a single process trains as `none`."});
  r.add({"parallel.dp",
         T::kInt,
         int64_t(0),
         "Data-parallel replicas of the model (0: the workers left over by pp x tp). With "
         "parallel.pp and parallel.tp, dp x pp x tp must be the number of workers "
         "(docs/parallelism.md).",
         "",
         {},
         0.0});
  r.add({"parallel.pp",
         T::kInt,
         int64_t(1),
         "Pipeline stages the model's layers are split into (GPT; the `model_parallel` "
         "strategy, settings under [pipeline]).",
         "",
         {},
         1.0});
  r.add({"parallel.tp",
         T::kInt,
         int64_t(1),
         "Tensor-parallel shards of each layer (GPT, Megatron-LM style: attention heads, MLP "
         "and vocabulary split over tp ranks).",
         "",
         {},
         1.0});
  parallel::add_strategy_keys(r);
}

}  // namespace

void add_distributed_keys(ConfigRegistry& r) {
  add_strategy_keys(r);
  add_comm_run_keys(r);
  add_ckpt_keys(r);
  add_health_keys(r);  // train/config/registry_health.cc
}

}  // namespace cohort::train
