#pragma once
// Straggler detection (Megatron's straggler detector, for cohort): every `every` steps the
// ranks exchange their median compute time per step over those steps (the median: one step
// descheduled by a busy machine does not make a rank slow), and a rank slower than the
// median of the others by `factor` for `patience` consecutive intervals is named.
//
// "Compute time" is the step's time less the communication it waited for (StepTimes: total
// less exposed): in lockstep strategies a slow rank makes every rank's step slow, because the
// others wait for it in the allreduce; what differs is who computes and who waits.
//
// StragglerDetector is the judgement alone (unit-tested without processes); StragglerWatch
// adds the exchange over a ProcessGroup, for strategies whose ranks step together (ddp, none
// with several workers, local SGD, gossip). Parameter-server workers form no group and must not
// be synchronised; the ps strategy reports its own straggler in its summary.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/comm/process_group.h"
#include "cohort/core/config.h"

namespace cohort::train {

struct StragglerOptions {
  int64_t every = 10;  // steps per interval; 0: off
  double factor = 1.5;
  int64_t patience = 2;  // consecutive slow intervals before a rank is named
};
// From metrics.straggler_every, _factor and _patience.
StragglerOptions straggler_options(const Config& cfg);

struct StragglerFinding {
  int rank = -1;
  double factor = 0;           // its median step over the median of the others'
  double step_s = 0;           // its median step (compute) over the interval
  double others_median_s = 0;  // the median of the other ranks' median steps
  int64_t intervals = 0;       // consecutive slow intervals so far
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options = {}) : options_(options) {}
  // One interval: every rank's median step in seconds, by rank (the same vector on every rank).
  // Returns the rank slow for at least `patience` intervals in a row (the slowest if several).
  std::optional<StragglerFinding> judge(const std::vector<double>& step_s);
  const StragglerOptions& options() const { return options_; }
  // Whether `rank` was slow in the last interval judged (named or not yet).
  bool slow_now(int rank) const {
    return rank >= 0 && size_t(rank) < streak_.size() && streak_[size_t(rank)] > 0;
  }

 private:
  StragglerOptions options_;
  std::vector<int64_t> streak_;  // per rank: consecutive slow intervals
};

// The log line naming a straggler, e.g. "straggler: rank 1 median step 24.6 ms, 2.0x the median
// of the others (12.3 ms), slow for 2 intervals of 10 steps".
std::string describe(const StragglerFinding& f, int64_t every);

class StragglerWatch {
 public:
  StragglerWatch() = default;  // off
  // group null or of one rank: off.
  StragglerWatch(StragglerOptions options, std::shared_ptr<comm::ProcessGroup> group);

  // After every step, on every rank of the group, with the step's compute time (collective
  // once every `every` steps). Returns the log line when a rank is newly named: another rank,
  // or the same after `patience` intervals without a straggler (the same on every rank; the
  // chief prints it).
  std::optional<std::string> after_step(int64_t step, double compute_s);
  // {"rank": R, "factor": F} once after each interval a rank is named in (for the next step
  // record); null otherwise.
  nlohmann::json take_record();
  // {"straggler": {"rank", "factor" (the largest), "intervals", "first_step"}} for the rank
  // named in the most intervals; {} if none was.
  nlohmann::json summary() const;

 private:
  StragglerDetector detector_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::vector<double> interval_s_;  // this rank's compute times since the last exchange
  nlohmann::json pending_;
  int last_named_ = -1;
  // Intervals in a row in which the last named rank was not slow. It is named anew (another
  // log line) only after `patience` of them, so a rank hovering at the factor logs once.
  int64_t quiet_intervals_ = 0;
  struct Named {
    int64_t intervals = 0, first_step = 0;
    double max_factor = 0;
  };
  std::vector<Named> named_;  // by rank
};

}  // namespace cohort::train
