#include "cohort/monitor/replay.h"

#include <cmath>
#include <queue>
#include <string>
#include <tuple>

namespace cohort::monitor {
namespace {

// The record's own time on its process's clock, or NaN when it carries none.
double own_time_s(const Json& r) {
  if (!r.is_object()) return NAN;
  for (const char* key : {"time_s", "wall_seconds"}) {
    auto it = r.find(key);
    if (it != r.end() && it->is_number()) return it->get<double>();
  }
  return NAN;
}

bool is_start(const Json& r) {
  auto it = r.is_object() ? r.find("event") : r.end();
  return it != r.end() && it->is_string() && it->get<std::string>() == "start";
}

// Each record's time on the run's clock: carried forward past records without one, and shifted
// after a resume's "start" (see replay.h).
std::vector<double> file_times(const std::vector<Json>& records) {
  std::vector<double> out;
  out.reserve(records.size());
  double offset = 0, last = 0;
  for (const Json& r : records) {
    if (is_start(r)) offset = last;
    const double t = own_time_s(r);
    if (std::isfinite(t)) last = std::max(last, offset + t);
    out.push_back(last);
  }
  return out;
}

// "1, 3": the ranks of `view` that wrote no summary.
std::string unfinished_ranks(const JobView& view) {
  std::string out;
  for (const auto& [rank, t] : view.totals())
    if (!t.finished) out += (out.empty() ? "" : ", ") + std::to_string(rank);
  return out;
}

}  // namespace

std::vector<TimedRecord> merged_records(const RecordedRun& run) {
  struct File {
    int rank;
    const std::vector<Json>* records;
    std::vector<double> times;
  };
  std::vector<File> files;
  size_t total = 0;
  for (const auto& [rank, records] : run.ranks) {
    files.push_back({rank, &records, file_times(records)});
    total += records.size();
  }
  // A k-way merge keeps every file's own order even where its times are not monotonic.
  using Head = std::tuple<double, int, size_t, size_t>;  // time, rank, file, index
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (size_t f = 0; f < files.size(); ++f)
    if (!files[f].records->empty()) heads.emplace(files[f].times[0], files[f].rank, f, 0);
  std::vector<TimedRecord> out;
  out.reserve(total);
  while (!heads.empty()) {
    auto [time, rank, f, i] = heads.top();
    heads.pop();
    out.push_back({rank, &(*files[f].records)[i], time});
    if (i + 1 < files[f].records->size()) heads.emplace(files[f].times[i + 1], rank, f, i + 1);
  }
  return out;
}

std::unique_ptr<JobView> replay(const RecordedRun& run, JobViewOptions options) {
  auto view = std::make_unique<JobView>(options);
  for (const TimedRecord& r : merged_records(run)) view->ingest_at(r.rank, *r.record, r.time_s);
  const std::string missing = unfinished_ranks(*view);
  if (missing.empty())
    view->event("finished", "all workers finished");  // the launcher's words, live
  else
    view->event("incomplete", "no summary from rank(s) " + missing +
                                  ": the run stopped early, or is still running");
  return view;
}

}  // namespace cohort::monitor
