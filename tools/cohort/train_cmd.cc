// `cohort train CONFIG.toml [--set key=value]... [--workers N [--servers S]] [--resume auto|DIR]
// [--max-restarts K]`: trains on this process, or launches N data-parallel workers of itself
// (through the same launcher as `cohort run`), plus S parameter servers for
// parallel.strategy = "ps". A process the launcher started as a server (COHORT_ROLE=server)
// serves instead of training.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cohort/launch/launcher.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/roles/ps_server_role.h"
#include "cohort/train/run_dir.h"
#include "cohort/train/trainer.h"
#include "tools/cohort/commands.h"
#include "tools/cohort/count_range.h"
#include "tools/cohort/dashboard_flags.h"
#include "tools/cohort/master_flags.h"
#include "tools/cohort/train_preflight.h"

namespace cohort::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string workers_spec;  // --workers: "N" or "MIN:MAX"
  int workers = 0;           // 0: train in this process; MIN:MAX launches MAX
  int min_workers = 0;       // MIN of MIN:MAX (elastic.min_workers); 0: a plain N
  int servers = 0;           // parameter servers beside the workers
  std::string resume;
  int max_restarts = 0;
  bool respawn = false;
  std::string bind = "auto";
  DashboardArgs dashboard;
  MasterArgs master;  // where the launcher hosts the store (default: loopback, a free port)
};

// --workers MIN:MAX: MAX workers launched, elastic.min_workers = MIN (docs/elastic.md); a
// config or --set that asks for another minimum is refused rather than overridden.
void add_elastic_range(TrainArgs& a) {
  if (a.min_workers == 0) return;
  Config cfg = train::load_config(a.config, a.sets, train::environment_snapshot());
  const int64_t set = cfg.get_int("elastic.min_workers");
  COHORT_CHECK_ARG(set == 0 || set == a.min_workers, "cohort train: --workers ", a.workers_spec,
                   " asks for at least ", a.min_workers,
                   " workers, but elastic.min_workers = ", set, ": give one of them");
  a.sets.push_back("elastic.min_workers=" + std::to_string(a.min_workers));
}

int train_here(const TrainArgs& a) {
  std::vector<std::string> sets = a.sets;
  if (!a.resume.empty()) sets.push_back("run.resume=" + a.resume);
  Config cfg = train::load_config(a.config, sets, train::environment_snapshot());
  const rendezvous::EnvMap env = rendezvous::snapshot_environment();
  if (train::is_server_role(env)) {
    train::run_parameter_server(cfg, env);
    return 0;
  }
  check_strategy_name(cfg);  // a line naming the key, not every strategy's description
  train::Trainer trainer(cfg);
  trainer.run();
  return 0;
}

// The launcher re-runs this executable as `cohort train CONFIG --set ...` in each worker.
int launch_workers(const TrainArgs& a) {
  // Fail on a bad config here, once, rather than in every worker.
  Config cfg = train::load_config(a.config, a.sets, train::environment_snapshot());
  check_config_before_launch(cfg, a.workers);
  const bool ps = cfg.get_string("parallel.strategy") == "ps";
  COHORT_CHECK_ARG(ps == (a.servers > 0),
                   ps ? "cohort train: parallel.strategy = 'ps' needs parameter servers: add "
                        "--servers S"
                      : "cohort train: --servers needs parallel.strategy = 'ps' (the config has "
                        "'" +
                            cfg.get_string("parallel.strategy") + "')");
  launch::LaunchOptions o;
  o.command = {launch::self_executable(), "train", a.config};
  for (const std::string& s : a.sets) o.command.insert(o.command.end(), {"--set", s});
  if (!a.resume.empty()) o.command.insert(o.command.end(), {"--resume", a.resume});
  o.nproc_per_node = a.workers;
  o.master = master_address(a.master);
  o.num_servers = a.servers;
  o.max_restarts = a.max_restarts;
  o.elastic_min_workers = int(cfg.get_int("elastic.min_workers"));
  o.elastic_respawn = a.respawn;
  COHORT_CHECK_ARG(!a.respawn || o.elastic_min_workers > 0, "cohort train: --respawn needs ",
                   "in-place recovery: set elastic.min_workers (docs/elastic.md)");
  o.bind = launch::parse_bind(a.bind);
  // One run directory for every worker and every restart, chosen before any starts
  // (train/run_dir.h): a fresh run never writes into an earlier run's.
  const train::RunDir dir = train::choose_run_dir(
      cfg.get_string("run.dir"), cfg.get_string("run.name"),
      a.resume.empty() ? train::RunStart::kFresh : train::RunStart::kContinue);
  if (dir.avoided_earlier()) std::fprintf(stderr, "%s\n", train::numbered_run_notice(dir).c_str());
  o.extra_env.emplace_back(train::kRunDirVariable, dir.path);
  // Flight-recorder dumps of a hung or failed job land in its run directory (not /tmp), where
  // the user looks and the run's other evidence lies; COHORT_FLIGHT_DIR still wins.
  if (!rendezvous::snapshot_environment().contains("COHORT_FLIGHT_DIR"))
    o.extra_env.emplace_back("COHORT_FLIGHT_DIR",
                             (std::filesystem::path(dir.path) / "flight").string());
  std::unique_ptr<monitor::Dashboard> dashboard = start_dashboard(a.dashboard, o);
  launch::LaunchResult r = launch::run(o);
  end_dashboard(dashboard.get(), r);
  if (r.exit_code != 0) std::fprintf(stderr, "cohort train: %s\n", r.message.c_str());
  return r.exit_code;
}

}  // namespace

void add_train_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a TOML config");
  auto a = std::make_shared<TrainArgs>();
  cmd->add_option("config", a->config, "TOML config file (see docs/config.md)")->required();
  cmd->add_option("--set", a->sets, "Override a key, e.g. --set optim.lr=0.1 (repeatable)");
  // torchrun's names for it work too: a torchrun command line needs only its launcher changed.
  cmd->add_option("--workers,--nproc-per-node,--nproc_per_node", a->workers_spec,
                  "Launch N data-parallel workers on this machine (like torchrun "
                  "--nproc-per-node N); MIN:MAX launches MAX that go on in place while MIN "
                  "remain (elastic.min_workers = MIN, docs/elastic.md)")
      ->check(CLI::Validator(
          [](std::string& v) {
            int lo = 0, hi = 0;
            return check_count_range(v, &lo, &hi);
          },
          "N|MIN:MAX"))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // scripts/main-job.sh --workers 4
  cmd->add_option("--servers", a->servers,
                  "With --workers and parallel.strategy = \"ps\": also start S parameter "
                  "servers on this machine (docs/ps.md)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--resume", a->resume,
                  "`auto`: continue from the newest checkpoint that verifies; or a checkpoint "
                  "directory (sets run.resume)");
  cmd->add_option("--bind", a->bind,
                  "With --workers: pin workers to cores (auto: when they fit, as mpirun; core; "
                  "none)")
      ->capture_default_str();
  cmd->add_flag("--respawn", a->respawn,
                "Elastic jobs (elastic.min_workers): start a lost worker again to join the "
                "running job, which admits it at a step boundary (docs/elastic.md)");
  cmd->add_option("--max-restarts", a->max_restarts,
                  "With --workers: restart all workers up to K times after a failure; they "
                  "resume from the newest checkpoint. With --servers: a failed parameter server "
                  "restarts alone from its own checkpoint")
      ->check(CLI::Range(0, 1000));
  add_master_options(cmd, a->master,
                     "With --workers: ADDR:PORT to host the job's store on (default: 127.0.0.1 "
                     "with a free port)");
  add_dashboard_options(cmd, a->dashboard);
  cmd->callback([&h, a] {
    h.run = [a] {
      if (!a->workers_spec.empty())
        check_count_range(a->workers_spec, &a->min_workers, &a->workers);
      add_elastic_range(*a);
      if (a->dashboard.requested() && a->workers == 0) a->workers = 1;  // served by the launcher
      if (a->workers > 0) return launch_workers(*a);
      COHORT_CHECK_ARG(a->servers == 0, "cohort train: --servers needs --workers N");
      COHORT_CHECK_ARG(master_address(a->master).empty(),
                       "cohort train: --master needs --workers N (the launcher hosts the store)");
      COHORT_CHECK_ARG(a->max_restarts == 0,
                       "cohort train: --max-restarts needs --workers N (restarts are done by "
                       "the launcher)");
      return train_here(*a);
    };
  });
}

}  // namespace cohort::cli
