#include "cohort/train/roles/ps_server_role.h"

#include <signal.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "cohort/ckpt/checkpoint_aside.h"
#include "cohort/core/logging.h"
#include "cohort/core/thread_pool.h"
#include "cohort/metrics/sink.h"
#include "cohort/ps/ps_strategy.h"
#include "cohort/ps/server.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/train/components.h"
#include "cohort/train/run_dir.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {
namespace {

// Log lines of the parameter servers carry their strategy's name as the tag.
constexpr const char* kLog = ps::kStrategyName;

int required_int(const rendezvous::EnvMap& env, const char* name) {
  const int v = rendezvous::int_from_env(env, name, -1);
  COHORT_CHECK_ARG(v >= 0, "parameter server: ", name,
                   " is not set (servers are started by `cohort train --servers S`)");
  return v;
}

std::string metrics_path(const Config& cfg, int index) {
  const std::string dir = make_run_dir(cfg, /*write_config=*/false);
  return detail::str(dir, "/metrics.server", index, ".jsonl");
}

// The end of a server's run: a log line (updates/s, dropped pushes, staleness, the straggler
// if any) and a "server_summary" record (with bytes in/out and queue depth) in <run
// dir>/metrics.server<i>.jsonl.
void report(const Config& cfg, int index, const ps::ServerStats& st) {
  const double ups = st.seconds > 0 ? double(st.updates) / st.seconds : 0;
  log::info(kLog, "parameter server ", index, ": every worker finished; ", st.updates,
            " updates in ", st.seconds, " s (", ups, " updates/s), ", st.pushes, " pushes, ",
            st.dropped, " dropped, ", st.held, " held by SSP; staleness max ", st.max_staleness,
            ", mean ", st.mean_staleness, "; ", st.traffic.bytes_in, " bytes in, ",
            st.traffic.bytes_out, " out; queue depth max ", st.traffic.queue_depth_max, ", mean ",
            st.traffic.queue_depth_mean());
  nlohmann::json j{{"event", "server_summary"},
                   {"server", index},
                   {"updates", st.updates},
                   {"pushes", st.pushes},
                   {"updates_per_s", ups},
                   {"dropped_pushes", st.dropped},
                   {"held_answers", st.held},
                   {"staleness_max", st.max_staleness},
                   {"staleness_mean", st.mean_staleness}};
  nlohmann::json medians = nlohmann::json::array();
  for (double m : st.median_step_s) medians.push_back(1e3 * m);
  j["median_step_ms"] = medians;
  if (st.straggler) {
    const ps::Straggler& s = *st.straggler;
    log::warn(kLog, "parameter server ", index, ": straggler: worker ", s.rank, ", median step ",
              1e3 * s.median_s, " ms against ", 1e3 * s.others_median_s, " ms for the others (",
              s.median_s / s.others_median_s, "x)");
    j["straggler"] = {{"rank", s.rank},
                      {"median_step_ms", 1e3 * s.median_s},
                      {"others_median_step_ms", 1e3 * s.others_median_s}};
  }
  j.update(ps::traffic_json(st.traffic));
  metrics::JsonlFile(metrics_path(cfg, index)).write(j);
}

// Every ps.server_metrics_every updates, a "server_interval" record (server_metrics.h) in the
// same file as the summary.
void add_interval_records(const Config& cfg, int index, ps::ServerOptions& o) {
  o.metrics_every_updates = cfg.get_int("ps.server_metrics_every");
  if (o.metrics_every_updates <= 0) return;
  auto log = std::make_shared<metrics::JsonlFile>(metrics_path(cfg, index));
  o.on_interval = [log, index](const ps::ServerInterval& i) {
    log->write(ps::interval_record(index, i));
  };
}

// Where server `index` checkpoints: <ckpt.dir or run dir/checkpoints>/server-<index>.
std::string server_ckpt_dir(const Config& cfg, int index) {
  std::string dir = cfg.get_string("ckpt.dir");
  if (dir.empty()) dir = make_run_dir(cfg, /*write_config=*/false) + "/checkpoints";
  return detail::str(dir, "/server-", index);
}

// A fresh server must never restore, after a restart, what an earlier run left in its
// directory (a shared ckpt.dir): it moves that into a new generation folder <dir>.earlier/<n>/
// first (as the trainer does with its own); earlier generations stay as they are.
void move_aside_earlier(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return;
  const std::string to = ckpt::move_aside({dir}, ckpt::earlier_root(dir));
  log::info(kLog, "moved an earlier run's server checkpoints from ", dir, " to ", to);
}

// fault.kill_server / fault.kill_server_at_step: the test seam for "kill -9 of a server".
std::function<void(int64_t)> kill_seam(const Config& cfg, int index, int restarts) {
  if (cfg.get_int("fault.kill_server") != index || restarts > 0) return {};
  const int64_t at = cfg.get_int("fault.kill_server_at_step");
  return [at, index](int64_t step) {
    if (step < at) return;
    log::warn(kLog, "fault injection: parameter server ", index, " kills itself at step ", step);
    ::raise(SIGKILL);
  };
}

// Progress steps as "3,10,15" in the store, and back.
std::string join_steps(const std::vector<ps::SavedCheckpoint>& saved) {
  std::string s;
  for (const ps::SavedCheckpoint& c : saved)
    s += (s.empty() ? "" : ",") + std::to_string(c.progress);
  return s;
}

std::set<int64_t> split_steps(const std::string& s) {
  std::set<int64_t> steps;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) steps.insert(std::stoll(item));
  return steps;
}

// A whole job resumed: each server publishes the steps of its checkpoints that verify, and
// reads the others'. None anywhere: a fresh start (-1). Some servers with checkpoints and some
// without, or (BSP, where every worker pushes one step to all servers) no step in common: the
// servers cannot resume together, an error that lists them. Else BSP loads the newest step
// every server has, ASP/SSP each its newest (their workers' clocks say where pushes resume).
int agree_on_step(rendezvous::Store& store, int index, int servers, bool bsp,
                  std::chrono::milliseconds timeout,
                  const std::vector<ps::SavedCheckpoint>& saved) {
  store.set_string("ps/resume/" + std::to_string(index), join_steps(saved));
  std::set<int64_t> common;
  for (const ps::SavedCheckpoint& c : saved) common.insert(c.progress);
  std::string lists;
  int empty = 0;
  for (int j = 0; j < servers; ++j) {
    const std::string theirs = store.get_string("ps/resume/" + std::to_string(j), timeout);
    const std::set<int64_t> steps = split_steps(theirs);
    std::erase_if(common, [&](int64_t step) { return !steps.count(step); });
    lists += detail::str(j ? "; " : "", "server ", j, ": ", theirs.empty() ? "none" : theirs);
    empty += steps.empty();
  }
  if (empty == servers) return -1;  // nothing checkpointed yet: the job starts afresh
  COHORT_CHECK_ARG(empty == 0 && (!bsp || !common.empty()), "parameter server ", index,
                   ": --resume auto, but the servers' checkpoints that verify are at steps (",
                   lists, ")", empty ? ": some servers have none" : ", none common to all",
                   "; they cannot resume together (move the checkpoint directories aside to "
                   "start afresh)");
  if (!bsp) return int(saved.size()) - 1;
  const int64_t step = *common.rbegin();
  int pick = -1;  // the newest of mine at that step (a goodbye's save repeats a step)
  for (size_t i = 0; i < saved.size(); ++i)
    if (saved[i].progress == step) pick = int(i);
  if (saved[size_t(pick)].progress != saved.back().progress)
    log::info(kLog, "parameter server ", index, ": resuming at step ", step,
              ", the newest step every server has checkpointed (its own newest: ",
              saved.back().progress, ")");
  return pick;
}

// Before anything else that can fail: a restart must never find an earlier run's checkpoints.
// `run.resume = auto` (the whole job again): restore them instead, with no fault seam.
void set_recovery(ps::ServerOptions& o, const Config& cfg, const rendezvous::EnvMap& env) {
  const int restarts = rendezvous::int_from_env(env, "COHORT_SERVER_RESTARTS", 0);
  const bool resuming = ps::resumes_job(cfg);
  if (!resuming) o.after_update = kill_seam(cfg, o.index, restarts);
  const bool checkpoints = cfg.get_bool("ckpt.enabled") && cfg.get_int("ckpt.every_steps") > 0;
  COHORT_CHECK_ARG(restarts == 0 || checkpoints, "parameter server ", o.index,
                   " was restarted, but it keeps no checkpoints (ckpt.enabled = false or "
                   "ckpt.every_steps = 0): its shard and optimizer state are lost and the job "
                   "cannot go on; set ckpt.every_steps to let a server restart");
  COHORT_CHECK_ARG(!resuming || checkpoints,
                   "run.resume = 'auto' of a parameter-server job resumes from the servers' "
                   "checkpoints, but they keep none (ckpt.enabled = false or ckpt.every_steps = "
                   "0); set ckpt.every_steps (in the run to be resumed, too)");
  if (!checkpoints) return;
  o.ckpt_dir = server_ckpt_dir(cfg, o.index);
  o.ckpt_every = cfg.get_int("ckpt.every_steps");
  o.ckpt_keep = int(cfg.get_int("ckpt.keep"));
  o.restore = restarts > 0 || resuming;
  if (!o.restore) move_aside_earlier(o.ckpt_dir);
}

// What workers dial: comm.advertise_address (with the bound port) when set, else the bound
// address (bind 0.0.0.0 needs an advertised one: workers cannot dial 0.0.0.0). Checked once at
// the start with port 0 (nodes: the job's; loopback on several nodes is worth a warning).
std::string published_address(const Config& cfg, const std::string& bound, int nodes) {
  const std::string advertise = cfg.get_string("comm.advertise_address");
  const std::string port = bound.substr(bound.rfind(':') + 1);
  if (!advertise.empty()) return advertise + ":" + port;
  const std::string host = bound.substr(0, bound.rfind(':'));
  COHORT_CHECK_ARG(host != "0.0.0.0" && host != "::" && host != "[::]",
                   "parameter server: comm.bind_address = '", host,
                   "' needs comm.advertise_address (the address workers dial)");
  if (nodes > 1 && (host.rfind("127.", 0) == 0 || host == "localhost" || host == "::1"))
    log::warn(kLog, "parameter server: comm.bind_address = '", host,
              "' is loopback but the job "
              "spans ",
              nodes,
              " nodes: workers on other hosts cannot reach it (set this host's "
              "address, or 0.0.0.0 with comm.advertise_address)");
  return bound;
}

// The run directory `cohort train --servers` chose (COHORT_RUN_DIR); under another launcher
// (`cohort run --servers`), the one worker rank 0 chose and published in the store. Asked
// before the server writes anything: a server that made <run.name> itself would make rank 0,
// finding it taken, choose <run.name>.2 (run_dir.h).
std::string job_run_dir(const rendezvous::EnvMap& env, rendezvous::Store& store,
                        std::chrono::milliseconds timeout) {
  if (auto it = env.find(kRunDirVariable); it != env.end() && !it->second.empty())
    return it->second;
  return store.get_string(kRunDirStoreKey, timeout);
}

std::chrono::milliseconds server_timeout(const Config& cfg) {
  double timeout_s = cfg.get_float("ps.timeout_s");
  if (timeout_s <= 0) timeout_s = cfg.get_float("comm.timeout_s");
  return std::chrono::milliseconds(int64_t(timeout_s * 1000.0));
}

void set_server_options(ps::ServerOptions& o, const Config& cfg, const rendezvous::EnvMap& env,
                        const net::Secret& secret) {
  o.host = cfg.get_string("comm.bind_address");  // loopback unless told otherwise
  published_address(cfg, o.host + ":0", rendezvous::int_from_env(env, "COHORT_NNODES", 1));
  o.num_servers = required_int(env, "COHORT_NUM_SERVERS");
  o.num_workers = required_int(env, "COHORT_NUM_WORKERS");
  o.secret = secret;
  o.secret_policy = net::SecretPolicy::kAllowInsecure;
  o.make_optimizer = [&cfg](optim::NamedParams p) { return make_optimizer(cfg, std::move(p)); };
  o.make_schedule = [&cfg](int64_t total) { return make_schedule(cfg, total); };
  o.consistency = ps::consistency_from_config(cfg, o.num_workers);
  o.compression = ps::push_compression_from_config(cfg);
  o.shared_memory = ps::shared_memory_from_config(cfg);
  add_interval_records(cfg, o.index, o);
  o.rejoin_timeout = server_timeout(cfg);  // a worker restarted alone (--max-restarts) comes back
}

}  // namespace

bool is_server_role(const rendezvous::EnvMap& env) {
  auto it = env.find("COHORT_ROLE");
  return it != env.end() && it->second == "server";
}

void run_parameter_server(const Config& given, const rendezvous::EnvMap& env) {
  Config cfg = given;
  COHORT_CHECK_ARG(cfg.get_string("parallel.strategy") == ps::kStrategyName,
                   "parameter server started, but parallel.strategy = '",
                   cfg.get_string("parallel.strategy"), "'; servers need 'ps'");
  const int index = required_int(env, "COHORT_SERVER_INDEX");
  const net::Secret secret = rendezvous::secret_from_env(env, net::SecretPolicy::kAllowInsecure);
  const auto timeout = server_timeout(cfg);
  rendezvous::TcpStore store(
      {.host = env.count("COHORT_MASTER_ADDR") ? env.at("COHORT_MASTER_ADDR") : "127.0.0.1",
       .port = uint16_t(required_int(env, "COHORT_MASTER_PORT")),
       .secret = secret,
       .secret_policy = net::SecretPolicy::kAllowInsecure,
       .timeout = timeout,
       .connect_timeout = timeout});
  set_run_dir(cfg, job_run_dir(env, store, timeout));
  ps::ServerOptions o;
  o.index = index;
  set_recovery(o, cfg, env);
  set_num_threads(1);
  const auto model = make_model(cfg);
  o.params = model->named_parameters();
  set_server_options(o, cfg, env, secret);
  const bool restarted = rendezvous::int_from_env(env, "COHORT_SERVER_RESTARTS", 0) > 0;
  if (o.restore && !restarted) {  // the whole job resumed, not one server restarted alone
    const bool bsp = o.consistency.mode == ps::Mode::kBsp;
    o.choose_checkpoint = [&store, index, n = o.num_servers, bsp, timeout](const auto& saved) {
      return agree_on_step(store, index, n, bsp, timeout, saved);
    };
  }
  ps::ParamServer server(std::move(o));
  ps::publish_server(store, index, published_address(cfg, server.address(), 1));
  server.wait(timeout);
  report(cfg, index, server.stats());
}

}  // namespace cohort::train
