#pragma once
// Options and per-step statistics of parallel::DDP (ddp.h). Split out so that the reducer
// (reducer.h) can use them without the DDP class.
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace cohort::parallel {

struct DdpOptions {
  size_t bucket_bytes = size_t{25} << 20;       // torch's bucket_cap_mb default 25 MiB
  size_t first_bucket_bytes = size_t{1} << 20;  // small first bucket: communication starts early
  // false: a parameter that gets no gradient in a synced backward is an error naming it;
  // true: its gradient counts as zero for this step (it still receives the averaged gradient).
  bool find_unused_parameters = false;
  int64_t check_every = 0;        // >0: every K synced steps hash parameters across ranks
  bool broadcast_buffers = true;  // rank 0's buffers are broadcast at construction
  // PyTorch's gradient_as_bucket_view, on by default: once its bucket holds it, a parameter's
  // .grad *is* its slot of the bucket (from the second synced step on: after the first, the
  // buckets are rebuilt in ready order and that step's .grad gets memory of its own), so the
  // averaged gradient needs no copy back (and, with zero_grad filling zeros, backward accumulates
  // straight into the bucket). The .grad of every parameter then changes under the next synced
  // backward: keep a copy (clone) to hold one past it. false: .grad stays the tensor backward made;
  // the average is copied into it.
  bool gradient_as_bucket_view = true;
  std::chrono::milliseconds timeout{0};  // per collective; 0: the group's default
};

// Of the last synced backward.
struct DdpStepStats {
  double backward_s = 0;  // first grad-ready hook .. end of the backward graph
  // Sum over buckets of the allreduce's run time, as seen from the backward thread: from
  // max(launch, previous bucket's completion) to when its completion was observed (polled at
  // every hook and by the final wait), so an upper bound by at most one hook's interval.
  double comm_s = 0;
  double exposed_s = 0;  // time the end-of-backward callback waited for outstanding buckets
  int buckets = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // deltas of the process group's counters
};

}  // namespace cohort::parallel
