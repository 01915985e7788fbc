#pragma once
// Per-rank step timings (what `metrics.jsonl` step lines and the summary report):
//   data_s      waiting for the loader's next batch
//   forward_s   model forward and loss
//   backward_s  backward, including exposed_s
//   exposed_s   the part of backward spent waiting for gradient allreduce that was not hidden
//               behind computation (DDP's final wait); comm_s is the allreduce time in total
//   optimizer_s clipping, schedule and optimizer step
// The share of communication hidden behind backward is 1 - exposed / comm.
#include <cstdint>

#include <nlohmann/json.hpp>

namespace cohort::train {

struct StepTimes {
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  double exposed_s = 0, comm_s = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  int64_t samples = 0;      // this worker's (under a fixed global batch: its share of it)
  int64_t job_samples = 0;  // under a fixed global batch: the step's, every slot (else 0)

  StepTimes& operator+=(const StepTimes& o);
  double total_s() const { return data_s + forward_s + backward_s + optimizer_s; }
};

// Per-step means (milliseconds) of `total` over `steps`, and its byte totals.
nlohmann::json per_step_json(const StepTimes& total, int64_t steps);

class StepMetrics {
 public:
  void add(const StepTimes& t);
  // Per-step means (milliseconds) and totals over the steps since the last call; resets them.
  nlohmann::json take_interval();
  const StepTimes& run_total() const { return run_; }
  int64_t run_steps() const { return run_steps_; }
  // 1 - exposed / comm over the run; -1 when nothing was communicated.
  double hidden_share() const;

 private:
  StepTimes interval_, run_;
  int64_t interval_steps_ = 0, run_steps_ = 0;
};

}  // namespace cohort::train
