#include "tools/cohort/dashboard_flags.h"

#include <cstdio>

#include "cohort/core/error.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::cli {
namespace {

uint16_t parse_port(const std::vector<std::string>& v) {
  if (v.empty() || v[0].empty()) return 0;
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(v[0], &used);
    if (used != v[0].size()) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  COHORT_CHECK_ARG(port >= 0 && port < 65536, "--dashboard '", v[0],
                   "': expected a port number 0..65535 (0 or none: any free port). --dashboard "
                   "takes the next word as its port: put it after the config file, or write "
                   "--dashboard=PORT");
  return uint16_t(port);
}

}  // namespace

void add_dashboard_options(CLI::App* cmd, DashboardArgs& a) {
  a.option =
      cmd->add_option("--dashboard", a.port,
                      "Serve a live dashboard and Prometheus /metrics while the job runs, on PORT "
                      "(default: any free port; the address is printed)")
          ->expected(0, 1);
  cmd->add_option("--dashboard-bind", a.bind,
                  "Address the dashboard listens on; other than loopback, the page needs the job "
                  "secret as ?token= (the printed address carries it)")
      ->capture_default_str();
}

std::unique_ptr<monitor::Dashboard> start_dashboard(const DashboardArgs& a,
                                                    launch::LaunchOptions& o) {
  if (!a.requested()) return nullptr;
  // Each node's launcher sees only its own workers; one page for a multi-node job needs the
  // other nodes to stream to node 0, which is not built yet.
  COHORT_CHECK_ARG(o.nnodes == 1, "--dashboard works on a single node for now (--nnodes ", o.nnodes,
                   ")");
  net::Secret secret = rendezvous::secret_from_env(rendezvous::snapshot_environment(),
                                                   net::SecretPolicy::kAllowInsecure);
  if (secret.empty()) secret = net::Secret::generate();
  auto d = std::make_unique<monitor::Dashboard>(
      monitor::DashboardOptions{.bind = a.bind,
                                .port = parse_port(a.port),
                                .secret = secret,
                                .workers = o.nproc_per_node * o.nnodes});
  o.secret = secret;
  o.extra_env.emplace_back("COHORT_METRICS_STREAM", d->stream_address());
  monitor::JobView* view = &d->view();
  o.on_event = [view](const std::string& kind, const std::string& text) {
    view->event(kind, text);
  };
  std::printf("cohort: dashboard at %s (Prometheus: /metrics)\n", d->url().c_str());
  std::fflush(stdout);
  return d;
}

void end_dashboard(monitor::Dashboard* d, const launch::LaunchResult& r) {
  if (!d) return;
  d->view().event(r.exit_code == 0 ? "finished" : "failed",
                  r.exit_code == 0 ? "all workers finished" : r.message);
}

}  // namespace cohort::cli
