#include "tools/cohort/past_runs.h"

#include <set>

#include "cohort/core/error.h"
#include "cohort/monitor/replay.h"
#include "cohort/report/config_diff.h"
#include "cohort/report/run_data.h"

namespace cohort::cli {
namespace {

// The run's own name, unless another run has it: then the directory as given, which tells
// runs/a/train from runs/b/train; "(N)" after it only for a directory given twice.
std::vector<std::string> past_run_names(const std::vector<report::RunData>& runs) {
  std::map<std::string, int> count;
  for (const report::RunData& r : runs) ++count[r.name];
  std::vector<std::string> names;
  std::set<std::string> taken;
  for (const report::RunData& r : runs) {
    std::string name = count[r.name] > 1 ? r.dir : r.name;
    const std::string base = name;
    for (int n = 2; !taken.insert(name).second; ++n) name = base + " (" + std::to_string(n) + ")";
    names.push_back(name);
  }
  return names;
}

// Per run, the config keys whose values differ between the runs (run.name and run.dir always
// do, and the table's run column already says them).
std::vector<monitor::Json> differing_config(const std::vector<report::RunData>& runs) {
  std::vector<monitor::Json> out(runs.size(), monitor::Json::object());
  if (runs.size() < 2) return out;
  for (const report::ConfigDiff::Row& row : report::config_diff(runs).rows) {
    if (row.key == "run.name" || row.key == "run.dir") continue;
    for (size_t i = 0; i < runs.size() && i < row.values.size(); ++i)
      out[i][row.key] = row.values[i];
  }
  return out;
}

monitor::RecordedRun recorded_run_of(const report::RunData& run) {
  monitor::RecordedRun rec;
  size_t records = 0;
  for (const auto& [rank, r] : run.ranks) {
    rec.ranks[rank] = r.records;
    records += r.records.size();
  }
  COHORT_CHECK_ARG(records > 0, "run directory '", run.dir,
                   "' holds no metrics yet (its metrics files have no record)");
  return rec;
}

}  // namespace

std::vector<monitor::PastRun> load_past_runs(const std::vector<std::string>& dirs) {
  COHORT_CHECK_ARG(!dirs.empty(), "cohort dashboard: name at least one run directory");
  std::vector<report::RunData> data;
  for (const std::string& d : dirs) data.push_back(report::read_run(d));
  const std::vector<std::string> names = past_run_names(data);
  const std::vector<monitor::Json> config = differing_config(data);
  std::vector<monitor::PastRun> runs;
  for (size_t i = 0; i < data.size(); ++i) {
    const report::RunData& r = data[i];
    monitor::PastRun p{.name = names[i], .dir = r.dir};
    p.view =
        monitor::replay(recorded_run_of(r), {.workers = r.workers(), .history = kPastRunHistory});
    p.info =
        monitor::Json{{"strategy", r.strategy}, {"config", config[i]}, {"warnings", r.warnings}};
    runs.push_back(std::move(p));
  }
  return runs;
}

}  // namespace cohort::cli
