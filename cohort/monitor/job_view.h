#pragma once
// JobView: what the launcher knows of a running job, built from the records every rank streams
// to it (metrics/stream_sink.h) and the launcher's own events (a restart). The dashboard page
// and /metrics read it; it never blocks a worker (ingest is a few map updates under a mutex).
//
// Record shapes are the trainer's (docs/training.md, "Metrics"): "start", "step", "eval",
// "checkpoint", "summary". Per rank it keeps the latest step record and running totals
// (samples, bytes, a histogram of step times); per job the loss curve (rank 0's steps), the
// evaluations, the job's samples/s over time and per step, and an event list, each bounded by
// `history`.
//
// Live, a record's time is when it arrived (the steady clock since the view was made). A run
// read back from its files (`cohort dashboard RUN_DIR`, monitor/replay.h) is fed with
// ingest_at, whose time is the record's own: the same view, on the run's clock.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::monitor {

using Json = nlohmann::json;

// Upper bounds (seconds) of the step-time histogram's buckets (Prometheus `le`).
inline const std::vector<double> kStepBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,   0.25,   0.5,   1,    2.5,   5};

// A record's number: `fallback` when absent, NaN when it is not a number (a diverged loss is
// written as null), so that one odd field never makes the view throw.
double number_in(const Json& record, const char* key, double fallback = 0);

struct RankTotals {
  Json last_step = Json::object();  // the newest "step" record ({} before the first)
  int64_t step = 0;                 // its step
  int64_t samples = 0;              // samples trained so far (the record's "samples")
  // Samples counted once each, for a counter that never goes down: a resumed worker reports
  // fewer samples than before its restart, so only increases are added.
  int64_t samples_counted = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // summed over step records
  double energy_j = 0;                          // summed over step records' "energy_j"
  // Step-time histogram. A step record carries the mean over its interval's `steps` steps, so
  // each record adds `steps` observations of that mean (docs/monitoring.md says so).
  std::vector<uint64_t> bucket_counts = std::vector<uint64_t>(kStepBuckets.size(), 0);
  uint64_t step_count = 0;
  double step_seconds_sum = 0;
  bool straggler = false;  // named by the latest straggler report
  bool finished = false;   // its "summary" arrived
};

struct JobViewOptions {
  int workers = 0;        // ranks expected (shown before they report)
  size_t history = 4000;  // points kept per series and events kept
};

class JobView {
 public:
  explicit JobView(JobViewOptions options);

  // One record from `rank`. Malformed records (not an object, no "event", a field of the
  // wrong type) are skipped and counted; they come from our own workers (the stream is
  // authenticated), so they mean a bug, not an attack.
  void ingest(int rank, const Json& record);
  // The same, at `time_s` seconds into the run instead of now: a record replayed from a file.
  // From the first call on, the view's clock is the records' (elapsed_s, event times).
  void ingest_at(int rank, const Json& record, double time_s);
  // A launcher event: kind is "restart", "failure", "finished", ... ("finished", "failed" and
  // "incomplete", a replayed run without every rank's summary, also set the state).
  void event(const std::string& kind, const std::string& text);

  // Everything the page shows, as one JSON object (docs/monitoring.md, "/api/state").
  Json snapshot() const;
  // Per-rank totals, for /metrics.
  std::map<int, RankTotals> totals() const;
  int workers() const;
  int64_t restarts() const;
  uint64_t malformed() const;

 private:
  using Clock = std::chrono::steady_clock;
  void ingest_locked(int rank, const Json& record);
  void dispatch(int rank, const std::string& kind, const Json& record);
  void on_step(int rank, const Json& r);
  void on_eval(const Json& r);
  void on_start(int rank, const Json& r);
  void add_event(const std::string& kind, const std::string& text);
  double job_samples_per_s() const;  // sum over ranks of their latest samples/s
  double elapsed_s() const;

  JobViewOptions options_;
  Clock::time_point started_ = Clock::now();
  mutable std::mutex mu_;  // guards everything below
  std::map<int, RankTotals> ranks_;
  std::deque<Json> loss_;          // [step, loss] of rank 0
  std::deque<Json> throughput_;    // [elapsed s, job samples/s]
  std::deque<Json> step_tput_;     // [rank 0's step, job samples/s], to compare runs by step
  std::deque<Json> evals_;         // eval records
  std::deque<Json> events_;        // {time_s, kind, text}
  Json start_ = Json::object();    // rank 0's "start" record
  Json summary_ = Json::object();  // rank 0's "summary" record
  Json straggler_;                 // the latest {"rank", "factor"}, or null
  int64_t restarts_ = 0;
  uint64_t malformed_ = 0;
  std::string state_ = "starting";  // starting, running, finished, failed, incomplete
  bool replayed_ = false;           // ingest_at was called: the clock is replay_s_
  double replay_s_ = 0;
};

}  // namespace cohort::monitor
