#pragma once
// `cohort report`: run directories in, one self-contained HTML page out.
#include <string>
#include <vector>

#include "cohort/report/figures.h"

namespace cohort::report {

struct ReportOptions {
  std::vector<std::string> run_dirs;  // at least one
  std::string output;                 // "" -> <first run dir>/report.html
  FigureOptions figures;
  std::string chartjs_path;  // "" -> default_chartjs_path()
};

struct ReportResult {
  std::string output;                 // the page written
  std::vector<std::string> warnings;  // e.g. truncated last lines skipped
  std::string config_diff;            // with 2+ runs: what differs in their configs (text)
};

// Reads every run, computes the figures and writes the page. InvalidArgument for bad input
// (a missing directory, no metrics.jsonl, a malformed line: file and line named), IoError when
// Chart.js or the output cannot be read or written.
ReportResult write_report(const ReportOptions& o);

}  // namespace cohort::report
