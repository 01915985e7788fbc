// `cohort report RUN_DIR [RUN_DIR...] [-o OUT.html] [--compare] [--target-accuracy A]`: one
// self-contained HTML page (Chart.js inlined, figures embedded as JSON) from runs' metrics.
#include <cstdio>
#include <memory>

#include "cohort/report/html.h"
#include "cohort/report/report.h"
#include "tools/cohort/commands.h"

namespace cohort::cli {

void add_report_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write an HTML report (loss, accuracy, throughput, step breakdown, scaling, "
      "communication, energy) of one or more run directories; with several, what differs in "
      "their configs");
  auto o = std::make_shared<report::ReportOptions>();
  auto compare = std::make_shared<bool>(false);
  cmd->add_option("run_dirs", o->run_dirs, "Run directories (runs/<name>)")->required();
  cmd->add_option("-o,--output", o->output, "Output file (default: <first RUN_DIR>/report.html)");
  cmd->add_flag("--compare", *compare, "Runs side by side (a panel each, same axes), not overlaid");
  cmd->add_option("--target-accuracy", o->figures.target_accuracy,
                  "Accuracy (0..1) for time and energy to target")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--chartjs", o->chartjs_path,
                  "Chart.js to inline (default: " + report::default_chartjs_path() + ")");
  cmd->callback([&h, o, compare] {
    h.run = [o, compare] {
      o->figures.layout = *compare ? report::Layout::kCompare : report::Layout::kOverlay;
      report::ReportResult r = report::write_report(*o);
      for (const std::string& w : r.warnings)
        std::fprintf(stderr, "cohort report: warning: %s\n", w.c_str());
      std::printf("%s%s\n", r.config_diff.c_str(), r.output.c_str());
      return 0;
    };
  });
}

}  // namespace cohort::cli
