#pragma once
// Subcommand registration. Each add_*_command declares its options on `app` and, when its
// subcommand is the one parsed, sets handlers.run to the function that does the work.
#include <CLI/CLI.hpp>
#include <functional>

namespace cohort::cli {

struct Handlers {
  std::function<int()> run;
};

void add_train_command(CLI::App& app, Handlers& h);
void add_config_command(CLI::App& app, Handlers& h);
void add_bench_command(CLI::App& app, Handlers& h);
void add_run_command(CLI::App& app, Handlers& h);
void add_report_command(CLI::App& app, Handlers& h);
void add_dashboard_command(CLI::App& app, Handlers& h);
void add_ckpt_command(CLI::App& app, Handlers& h);
void add_fl_command(CLI::App& app, Handlers& h);

}  // namespace cohort::cli
