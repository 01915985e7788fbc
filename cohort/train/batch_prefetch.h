#pragma once
// The trainer's batches on a device: step s+1's micro-batches start their copy there
// (DeviceMemory::upload_async: staged through page-locked memory and copied on a copy stream)
// before step s is queued, so the copy overlaps step s's kernels and step s+1 waits for that copy
// only, on the device (the host never blocks on it). Tensor::to would make every step wait, on
// the host, for a copy from pageable memory.
//
// The loops hand over each step's input as it is assembled and train what comes back:
//
//   BatchPrefetch feed(device, enabled);
//   for (...) if (auto ready = feed.push(next_step)) train(*ready);
//   if (auto last = feed.flush()) train(*last);  // the epoch's last step
//
// On a device push() returns the step handed over before (none for the first), its batches on
// the device; on the CPU, or when not enabled (data.prefetch = 0), the same step, untouched, and
// the step copies its batches itself. Either way the steps come back in the order given, with
// the same values, so training is bit for bit the same. A batch that cannot be uploaded (on
// another device, x and y of different batch sizes) fails at its own step, not at the one
// before: the error is kept and thrown by the push() or flush() that would have returned it.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cohort/data/dataset.h"

namespace cohort::train {

// One optimizer step's input and where it came from.
struct StepInput {
  std::vector<data::Batch> micro;  // train.grad_accum_steps micro-batches (fewer at an epoch's end)
  int64_t epoch = 0;
  int64_t batch_index = 0;  // the epoch's index of its last micro-batch
  double data_s = 0;        // seconds spent waiting for its batches
};

class BatchPrefetch {
 public:
  // Uploads ahead when `enabled` and `device` is not the CPU.
  BatchPrefetch(Device device, bool enabled);
  // A step still held is dropped; the device waits for its copies before they are freed.
  ~BatchPrefetch();
  BatchPrefetch(const BatchPrefetch&) = delete;
  BatchPrefetch& operator=(const BatchPrefetch&) = delete;

  // Hands over the next step's input; returns the step to train now.
  std::optional<StepInput> push(StepInput next);
  // The step still held (the last one given), its copies waited for by the device; none when
  // nothing is held.
  std::optional<StepInput> flush();
  bool uploads_ahead() const { return ahead_; }

 private:
  struct Held;
  std::unique_ptr<Held> upload(StepInput in) const;

  Device device_;
  bool ahead_;
  std::unique_ptr<Held> held_;
};

}  // namespace cohort::train
