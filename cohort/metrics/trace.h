#pragma once
// Tracer: a timeline of one rank's spans (forward and backward per module, each gradient
// bucket's allreduce, the optimizer step, data waits, checkpoint writes, evaluations), written
// in the Chrome trace-event format that chrome://tracing and ui.perfetto.dev open:
//
//   {"traceEvents": [
//      {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "rank 1"}},
//      {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "comm"}},
//      {"name": "backward", "cat": "step", "ph": "X", "ts": 1520.5, "dur": 830.25,
//       "pid": 1, "tid": 1, "args": {"step": 3}}, ...],
//    "displayTimeUnit": "ms", "otherData": {...}}
//
// pid is the rank, tid a track ("main", "comm", ...) numbered in order of first use; ts and dur
// are microseconds of the steady clock, shifted by this rank's offset to rank 0's clock
// (estimate_offset below), so that every rank's events line up in one merged file.
//
// Threads: complete() may be called from any thread (a mutex guards the events). Everything
// else is for the thread that owns the tracer. A Tracer is an object the trainer owns and hands
// by pointer to what it traces; a null pointer means tracing is off, so callers check it before
// reading the clock and the disabled path costs one branch.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::metrics {

struct TracerOptions {
  int rank = 0;
  size_t max_events = 1'000'000;  // past this, events are counted as dropped, not kept
};

// One Cristian round: the local clock when the request left and when the answer came back, and
// the reference clock (rank 0) when it answered. Microseconds.
struct ClockRound {
  double sent_us = 0, reference_us = 0, received_us = 0;
};

// reference ≈ local + offset_us, within ± uncertainty_us (half the round trip).
struct ClockOffset {
  double offset_us = 0;
  double uncertainty_us = 0;
  int rounds = 0;
};

// Cristian's algorithm: of the rounds, the one with the smallest round trip bounds the offset
// best; the reference answered at some instant inside [sent, received], so the offset is
// reference - midpoint, off by at most half the round trip. InvalidArgument if `rounds` is
// empty or a round has received < sent.
ClockOffset estimate_offset(const std::vector<ClockRound>& rounds);

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Tracer(TracerOptions options);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  int rank() const { return options_.rank; }
  // Microseconds on this rank's steady clock (the unit of ClockRound).
  static double now_us() { return to_us(Clock::now()); }
  static double to_us(Clock::time_point t);

  // Shifts every event (also those already recorded) by `offset`, written into the metadata.
  void set_clock_offset(const ClockOffset& offset);
  // A span [start, end] on `track`; `args` shows in the viewer's details (an object or null).
  void complete(std::string name, std::string_view category, Clock::time_point start,
                Clock::time_point end, std::string_view track = "main",
                nlohmann::json args = nullptr);
  size_t size() const;
  size_t dropped() const;

  // This rank's trace: its events, the metadata events naming the process ("rank R") and its
  // tracks, and "otherData" (rank, clock offset and uncertainty, events dropped).
  nlohmann::json to_json() const;
  // Writes to_json() to `path` (through a temporary file, then renamed); IoError naming it.
  void write(const std::string& path) const;

 private:
  struct Event {
    std::string name;
    std::string category;
    double start_us = 0, duration_us = 0;  // unshifted
    int track = 0;
    nlohmann::json args;
  };
  int track_id(std::string_view track);  // mu_ held

  TracerOptions options_;
  // Lock order: mu_ is the only lock; nothing is called while it is held.
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::string> tracks_;  // tid = index + 1
  size_t dropped_ = 0;
  ClockOffset offset_;
};

// Records [construction, destruction] on `tracer` (nothing, and no clock read, when null).
class Span {
 public:
  Span(Tracer* tracer, std::string name, std::string_view category, std::string_view track = "main")
      : tracer_(tracer) {
    if (!tracer_) return;
    name_ = std::move(name);
    category_ = category;
    track_ = track;
    start_ = Tracer::Clock::now();
  }
  ~Span() {
    if (tracer_)
      tracer_->complete(std::move(name_), category_, start_, Tracer::Clock::now(), track_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Tracer* tracer_;
  std::string name_;
  std::string_view category_, track_;  // string literals
  Tracer::Clock::time_point start_;
};

// Merges per-rank trace files (as Tracer::write makes them) into one: their events in rank
// order, and "otherData" listing each rank's clock offset, what was dropped, and which of the
// given files were missing (a rank whose run dir is on another node). Returns the number of
// files merged; IoError naming `out` if it cannot be written.
int merge_traces(const std::vector<std::string>& rank_files, const std::string& out);

}  // namespace cohort::metrics
