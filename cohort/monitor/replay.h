#pragma once
// Replay: a run's records, read back from its files, into a JobView, so that `cohort dashboard
// RUN_DIR...` shows a past run with the live dashboard's page and the same numbers.
//
// Live, the view gets records in the order the ranks sent them. The files keep each rank's
// order but not the interleaving between ranks (which the job's samples/s series depends on),
// so the replay merges the ranks' files by the records' own time: "time_s" (seconds since that
// process's trainer started), or a summary's "wall_seconds" (the same clock). A record without
// a time ("start", "checkpoint") keeps its place right after the previous record of its file.
// A resumed run appends a second "start" whose clock begins at 0 again: that rank's later times
// are shifted by where its clock had reached, so the run's clock never goes back.
#include <map>
#include <memory>
#include <vector>

#include "cohort/monitor/job_view.h"

namespace cohort::monitor {

// The records of one run: each rank's, in the order its file holds them.
struct RecordedRun {
  std::map<int, std::vector<Json>> ranks;
};

struct TimedRecord {
  int rank = 0;
  const Json* record = nullptr;  // points into the RecordedRun
  double time_s = 0;             // on the run's clock (see above)
};

// Every record of `run` in the order a live view would have received it. Ties (the same time)
// go to the lower rank first.
std::vector<TimedRecord> merged_records(const RecordedRun& run);

// A view of `run`: its records fed in merged order (JobView::ingest_at), then the event
// "finished" when every rank wrote a summary, else "incomplete" naming the ranks without one
// (the run stopped early, or is still running).
std::unique_ptr<JobView> replay(const RecordedRun& run, JobViewOptions options);

}  // namespace cohort::monitor
