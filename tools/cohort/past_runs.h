#pragma once
// The runs `cohort dashboard RUN_DIR...` serves: each directory read as `cohort report` reads
// it (report/run_data.h: metrics.jsonl, metrics.rank<R>.jsonl, config.toml), its records
// replayed into the view the live dashboard shows (monitor/replay.h), and beside it what the
// page's runs table lists: the strategy, the config keys whose values differ between the runs
// (report/config_diff.h), the warnings of the reading (a truncated last line).
#include <string>
#include <vector>

#include "cohort/monitor/runs_dashboard.h"

namespace cohort::cli {

// Points kept per series of a past run: a finished run is read whole, not a window of it.
inline constexpr size_t kPastRunHistory = 100000;

// One PastRun per directory, in the order given; names are the directories' last components
// (the directory as given where two runs share a name). InvalidArgument naming the directory
// when it does not exist, holds no metrics.jsonl, or holds no record at all; a malformed line
// is one too, with its file and line (read_jsonl).
std::vector<monitor::PastRun> load_past_runs(const std::vector<std::string>& dirs);

}  // namespace cohort::cli
