// The cohort command line: one file per subcommand (train_cmd.cc, config_cmd.cc).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cohort/core/error.h"
#include "tools/cohort/cli.h"
#include "tools/cohort/commands.h"
#include "tools/cohort/parse_errors.h"

int cohort::cli::main(int argc, char** argv) {
  CLI::App app{"cohort: distributed deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cohort 0.1.0");
  // Hidden: check the command line (subcommand, flags, their values) and exit 0 without running
  // it. tests/docs runs every `cohort ...` line of the docs through it.
  bool parse_only = false;
  app.add_flag("--parse-only", parse_only, "Check the command line and exit")->group("");
  cohort::cli::Handlers handlers;
  cohort::cli::add_train_command(app, handlers);
  cohort::cli::add_config_command(app, handlers);
  cohort::cli::add_bench_command(app, handlers);
  cohort::cli::add_run_command(app, handlers);
  cohort::cli::add_report_command(app, handlers);
  cohort::cli::add_dashboard_command(app, handlers);
  cohort::cli::add_ckpt_command(app, handlers);
  cohort::cli::add_fl_command(app, handlers);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cohort::cli::report_parse_error(app, e);  // exit 2, with a "did you mean"
  }
  if (parse_only) return 0;
  try {
    return handlers.run();
  } catch (const cohort::InvalidArgument& e) {
    std::fprintf(stderr, "cohort: error: %s\n", e.what());
    return cohort::cli::kUsageError;
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "cohort: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort: unexpected error: %s\n", e.what());
    return 1;
  }
}
