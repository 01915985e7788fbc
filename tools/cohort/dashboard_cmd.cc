// `cohort dashboard RUN_DIR... [--bind HOST] [--port PORT] [--print-state]`: the live
// dashboard's page for past runs, read from their run directories (docs/monitoring.md, "Past
// runs"), served until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <memory>

#include "cohort/rendezvous/bootstrap.h"
#include "tools/cohort/commands.h"
#include "tools/cohort/past_runs.h"

namespace cohort::cli {
namespace {

struct DashboardCmdArgs {
  std::vector<std::string> run_dirs;
  std::string bind = "127.0.0.1";
  int port = 0;
  bool print_state = false;
};

// SIGINT and SIGTERM blocked in this thread, and so in every thread started after (the web
// server's), so that sigwait below is the one place they arrive; restored when it ends.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  int wait() {
    int sig = 0;
    sigwait(&set_, &sig);
    return sig;
  }

 private:
  sigset_t set_, old_;
};

// The runs' names, for the line that prints the address.
std::string run_names(const std::vector<monitor::PastRun>& runs) {
  std::string out;
  for (const monitor::PastRun& r : runs) out += (out.empty() ? "" : ", ") + r.name;
  return out;
}

int serve_past_runs(const DashboardCmdArgs& a) {
  std::vector<monitor::PastRun> runs = load_past_runs(a.run_dirs);
  for (const monitor::PastRun& r : runs)
    for (const monitor::Json& w : r.info["warnings"])
      std::fprintf(stderr, "cohort dashboard: warning: %s\n", w.get<std::string>().c_str());
  if (a.print_state) {
    std::printf("%s\n", monitor::runs_state(runs)
                            .dump(-1, ' ', false, monitor::Json::error_handler_t::replace)
                            .c_str());
    return 0;
  }
  // The token derives from the job secret as the live dashboard's does: COHORT_JOB_SECRET
  // when set (a token that survives a restart), else a fresh one.
  net::Secret secret = rendezvous::secret_from_env(rendezvous::snapshot_environment(),
                                                   net::SecretPolicy::kAllowInsecure);
  if (secret.empty()) secret = net::Secret::generate();
  StopSignals signals;  // before the server's threads start
  const size_t count = runs.size();
  const std::string names = run_names(runs);
  monitor::RunsDashboard d(
      {.bind = a.bind, .port = uint16_t(a.port), .secret = secret, .port_flag = "--port PORT"},
      std::move(runs));
  std::printf("cohort: dashboard at %s (%zu run%s: %s; Ctrl-C stops it)\n", d.url().c_str(), count,
              count == 1 ? "" : "s", names.c_str());
  std::fflush(stdout);
  const int sig = signals.wait();
  d.stop();
  std::printf("cohort: dashboard stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 0;
}

}  // namespace

void add_dashboard_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand(
      "dashboard",
      "Serve the dashboard page for past runs, read from their run directories: browse them "
      "and compare their curves (loss, accuracy, samples/s) until Ctrl-C");
  auto a = std::make_shared<DashboardCmdArgs>();
  cmd->add_option("run_dirs", a->run_dirs, "Run directories (runs/<name>), one or more")
      ->required();
  cmd->add_option("--bind", a->bind,
                  "Address to listen on; other than loopback, the page needs a token as ?token= "
                  "(the printed address carries it)")
      ->capture_default_str();
  cmd->add_option("--port", a->port, "Port to listen on (default 0: any free port; printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_flag("--print-state", a->print_state,
                "Print the JSON the page reads (/api/state) and exit, serving nothing");
  cmd->callback([&h, a] { h.run = [a] { return serve_past_runs(*a); }; });
}

}  // namespace cohort::cli
