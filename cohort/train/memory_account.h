#pragma once
// Internal to train/: this rank's tensor memory by kind (tensor/allocator.h) and the
// run.memory_limit_mb cap (docs/memory.md).
//
// The trainer tags what the allocation sites cannot know: the model's parameters once they
// exist, the gradients after each step's backward (optimizer state is tagged by the optimizer
// itself, DDP buckets by the reducer). The summary reports the bytes in use at the end of the
// last step and the peaks over the training steps (and the run's peak apart), and beside them the
// process's peak resident memory (core/process_memory.h: Linux's VmHWM), which run.memory_limit_mb
// does not cap. The allocator is the process's: ranks run as threads of one process share its
// counts and its limit.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/core/config.h"
#include "cohort/nn/module.h"
#include "cohort/tensor/allocator.h"

namespace cohort::train {

class MemoryAccount {
 public:
  // Sets the allocator's limit from run.memory_limit_mb (when not 0), so that building the
  // model and the strategy count against it too.
  explicit MemoryAccount(const Config& cfg);
  ~MemoryAccount();  // clears the limit it set: the next Trainer in this process sets its own
  MemoryAccount(const MemoryAccount&) = delete;
  MemoryAccount& operator=(const MemoryAccount&) = delete;

  // Counts the model's parameters as kParameters; remembers them for after_backward. The
  // parameters' device, when not the CPU, is reported too (its backend's peak and cache): the
  // kinds above count host memory only.
  void tag_parameters(const nn::Module& model);
  // Training starts: the peaks start over here.
  void start();
  // Counts every defined gradient as kGradients (one atomic load each when already counted).
  void after_backward();
  // Remembers the bytes in use now: the summary's memory_bytes.
  void end_step();

  // memory_bytes {kind: bytes} (end of the last step), memory_peak_by_kind, memory_peak_bytes,
  // memory_peak_run_bytes, memory_limit_bytes, process_peak_rss_bytes (0 where unknown).
  nlohmann::json summary_json() const;
  // "memory (rank 0): parameters 1.2 MiB, ..., peak 12.3 MiB; process peak RSS 87.3 MiB".
  std::string summary_line(int rank) const;

 private:
  Device device_;  // where the parameters live
  bool limited_ = false;
  bool stepped_ = false;
  std::vector<Tensor> params_;
  MemoryUsage at_step_end_;
};

// The warning for a process whose peak resident memory ended above run.memory_limit_mb
// (`limit_bytes`) although its tensors stayed under it: not an error, since the key caps tensor
// memory only, but a user who set it to fit a machine or a cgroup should hear that the process
// needed more. "" when no limit is set (0), the peak is unknown (0) or it is within the limit.
std::string rss_over_limit_warning(uint64_t limit_bytes, uint64_t tensor_peak_bytes,
                                   uint64_t rss_peak_bytes);
// Logs (warn, subsystem "memory") rss_over_limit_warning of a summary record's
// memory_limit_bytes, memory_peak_run_bytes and process_peak_rss_bytes, when there is one.
void warn_rss_over_limit(const nlohmann::json& summary);

}  // namespace cohort::train
