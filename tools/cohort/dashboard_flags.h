#pragma once
// `--dashboard [PORT]` and `--dashboard-bind HOST`, shared by `cohort train` and `cohort run`:
// the launcher serves the live page and /metrics while the job runs (docs/monitoring.md).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cohort/launch/launcher.h"
#include "cohort/monitor/dashboard.h"

namespace cohort::cli {

struct DashboardArgs {
  std::vector<std::string> port;  // given: on; empty value: an OS-chosen port
  std::string bind = "127.0.0.1";
  CLI::Option* option = nullptr;  // --dashboard, to tell "given without a value" from absent
  bool requested() const { return option != nullptr && option->count() > 0; }
};

void add_dashboard_options(CLI::App* cmd, DashboardArgs& a);

// When asked for: starts the dashboard, gives the launcher its secret and events, and every
// worker COHORT_METRICS_STREAM; prints the page's address. nullptr when not asked for.
std::unique_ptr<monitor::Dashboard> start_dashboard(const DashboardArgs& a,
                                                    launch::LaunchOptions& o);
// Marks the job finished or failed on the page.
void end_dashboard(monitor::Dashboard* d, const launch::LaunchResult& r);

}  // namespace cohort::cli
