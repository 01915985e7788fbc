// `cohort run -n N [--nnodes M|MIN:MAX --node-rank I --master ADDR:PORT] [--respawn]
//  [--max-restarts K] [--no-tag] [--servers S] -- PROGRAM ARGS...`: the torchrun of cohort
//  (cohort/launch/launcher.h does the work). torchrun's flag spellings (--nproc_per_node,
//  --master-addr/--master-port, ...) work.
// Everything from PROGRAM on is the worker's command line, options included.
#include <cstdio>
#include <memory>

#include "cohort/core/error.h"
#include "cohort/launch/launcher.h"
#include "tools/cohort/commands.h"
#include "tools/cohort/count_range.h"
#include "tools/cohort/dashboard_flags.h"
#include "tools/cohort/master_flags.h"

namespace cohort::cli {
namespace {

struct RunCmdOptions {
  launch::LaunchOptions launch;
  std::string bind = "auto";
  bool no_tag = false;
  double stop_grace_s = 5.0;
  DashboardArgs dashboard;
  MasterArgs master;
  std::string nnodes = "1";  // N or MIN:MAX
};

// --nnodes MIN:MAX: MAX nodes, elastic across them (docs/elastic.md "Several nodes"): the job
// goes on while MIN nodes' workers remain; the workers' elastic.min_workers comes with them.
void set_node_range(RunCmdOptions& o) {
  int min_nodes = 0;
  const std::string why = check_count_range(o.nnodes, &min_nodes, &o.launch.nnodes);
  COHORT_CHECK_ARG(why.empty(), "cohort run: --nnodes: ", why);
  if (min_nodes == 0) return;
  o.launch.elastic_min_nodes = min_nodes;
  o.launch.elastic_min_workers = min_nodes * o.launch.nproc_per_node;
  o.launch.extra_env.emplace_back("COHORT_ELASTIC_MIN_WORKERS",
                                  std::to_string(o.launch.elastic_min_workers));
}

int run_launch(RunCmdOptions& o) {
  set_node_range(o);
  COHORT_CHECK_ARG(!o.launch.elastic_respawn || o.launch.elastic_min_workers > 0,
                   "cohort run: --respawn needs an elastic job: --nnodes MIN:MAX");
  o.launch.tag_output = !o.no_tag;
  o.launch.master = master_address(o.master);
  o.launch.bind = launch::parse_bind(o.bind);
  o.launch.stop_grace =
      std::chrono::milliseconds(static_cast<long long>(o.stop_grace_s * 1000.0 + 0.5));
  std::unique_ptr<monitor::Dashboard> dashboard = start_dashboard(o.dashboard, o.launch);
  launch::LaunchResult r = launch::run(o.launch);
  end_dashboard(dashboard.get(), r);
  if (r.exit_code != 0) std::fprintf(stderr, "cohort run: %s\n", r.message.c_str());
  return r.exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand(
      "run", "Launch N copies of a program with the COHORT_* rendezvous environment (torchrun)");
  auto o = std::make_shared<RunCmdOptions>();
  // torchrun's underscore spellings are accepted too, so its command lines work unchanged.
  cmd->add_option("-n,--nproc-per-node,--nproc_per_node", o->launch.nproc_per_node,
                  "Workers on this node")
      ->capture_default_str();
  cmd->add_option("--nnodes", o->nnodes,
                  "Nodes in the job; MIN:MAX: elastic across nodes, the job goes on while MIN "
                  "nodes' workers remain and a node cut off rejoins (docs/elastic.md)")
      ->check(CLI::Validator(
          [](std::string& v) {
            int lo = 0, hi = 0;
            return check_count_range(v, &lo, &hi);
          },
          "N|MIN:MAX"))
      ->capture_default_str();
  cmd->add_option("--node-rank,--node_rank", o->launch.node_rank, "This node's index, 0..nnodes-1")
      ->capture_default_str();
  add_master_options(cmd, o->master,
                     "ADDR:PORT of the store, hosted by node 0 (required with --nnodes > 1; "
                     "default: 127.0.0.1 with a free port)");
  cmd->add_option("--max-restarts,--max_restarts", o->launch.max_restarts,
                  "Restart all workers after a failure, up to K times (single node)")
      ->capture_default_str();
  cmd->add_option("--servers", o->launch.num_servers,
                  "Also start S parameter servers of the same program (COHORT_ROLE=server; "
                  "server i on node i % nnodes; with --max-restarts a failed server or worker "
                  "restarts alone; docs/ps.md)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--stop-grace", o->stop_grace_s,
                  "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  cmd->add_option("--bind", o->bind,
                  "Pin workers to cores: auto (when they fit on the cores, as mpirun), core, none")
      ->capture_default_str();
  cmd->add_flag("--respawn", o->launch.elastic_respawn,
                "Elastic jobs (--nnodes MIN:MAX): start a lost worker again to join the "
                "running job (docs/elastic.md)");
  cmd->add_flag("--no-tag", o->no_tag, "Do not prefix output lines with [rank R]");
  add_dashboard_options(cmd, o->dashboard);
  cmd->add_option("command", o->launch.command, "PROGRAM ARGS... (after --)")->required();
  // Everything after the first positional belongs to the program, even things like "-n 5".
  cmd->positionals_at_end();
  cmd->callback([&h, o] { h.run = [o] { return run_launch(*o); }; });
}

}  // namespace cohort::cli
