#pragma once
// The bookkeeping behind the parameter server's consistency modes and straggler detection,
// kept apart from the networking so that it is tested alone (tests/ps/consistency_test.cc).
//
// SspGate: each worker's clock is the number of pushes it made (steps 0..clock-1 are done).
// Under SSP with staleness s, a worker that just pushed (its clock is c) may compute its next
// step only when the slowest worker's clock is >= c - s: no worker runs more than s steps ahead
// of the slowest. s = 0 moves in lockstep (with ASP's per-push updates); no bound (ASP) is
// unbounded(). A worker that finished (said bye) no longer holds the others back.
//
// StepIntervals: per worker, the time between the server's answer and the worker's next push
// (its computation, whatever the mode: in BSP the interval between pushes is everyone's
// slowest). find_straggler names the worker whose median is well above the others'.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::ps {

enum class Mode { kBsp, kAsp, kSsp };

// "bsp" | "asp" | "ssp"; InvalidArgument naming ps.mode otherwise.
Mode parse_mode(const std::string& s);
const char* mode_name(Mode m);

// The [ps] consistency keys (ps_strategy.cc reads and checks them).
struct Consistency {
  Mode mode = Mode::kBsp;
  int64_t staleness = 3;      // SSP's bound
  bool staleness_lr = false;  // ASP/SSP: lr / max(1, staleness)
  int backup_workers = 0;     // BSP: apply each step after N - b pushes
};

class SspGate {
 public:
  static constexpr int64_t kUnbounded = -1;
  // staleness: s >= 0, or kUnbounded (ASP: every answer goes at once).
  SspGate(int num_workers, int64_t staleness);

  // Worker `rank` pushed a step: its clock advances. Returns how many steps it was ahead of
  // the slowest other running worker when it pushed (its lead: 0 for the slowest).
  int64_t push(int rank);
  // Whether worker `rank` may compute its next step now (its answer may go).
  bool may_proceed(int rank) const;
  // Worker `rank` finished (or went away): it no longer counts as the slowest.
  void leave(int rank);
  // Worker `rank` came back (restarted alone): it counts again, from its clock.
  void rejoin(int rank);
  // The smallest clock of the workers still running (the largest clock if none runs).
  int64_t slowest() const;
  int64_t clock(int rank) const { return clock_.at(size_t(rank)); }
  const std::vector<int64_t>& clocks() const { return clock_; }
  // A restarted server's clocks, from its checkpoint (InvalidArgument for another worker count
  // or a negative clock).
  void restore(const std::vector<int64_t>& clocks);

 private:
  int64_t staleness_;
  std::vector<int64_t> clock_;
  std::vector<bool> left_;
};

class StepIntervals {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StepIntervals(int num_workers);
  void answered(int rank, Clock::time_point t);  // the server answered the worker's push
  void pushed(int rank, Clock::time_point t);    // the worker pushed again: one interval
  // The median interval of worker `rank` in seconds; 0 with no interval yet.
  double median_s(int rank) const;
  int num_workers() const { return int(intervals_.size()); }

 private:
  std::vector<std::vector<double>> intervals_;
  std::vector<std::optional<Clock::time_point>> answered_at_;
};

struct Straggler {
  int rank = -1;
  double median_s = 0;         // its median step interval
  double others_median_s = 0;  // the median of the other workers' medians
};

// The slowest worker if its median is at least `factor` times the others' (and every worker
// has intervals); nothing with one worker.
std::optional<Straggler> find_straggler(const StepIntervals& s, double factor = 1.5);

double median(std::vector<double> v);  // 0 for an empty vector

}  // namespace cohort::ps
