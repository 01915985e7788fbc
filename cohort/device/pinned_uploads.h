#pragma once
// DeviceMemory::upload_async on one GPU (tensor/device_memory.h): host bytes staged through
// page-locked host buffers and copied on a copy stream of the GPU's own, so that the copy is a
// DMA that overlaps the kernels on its compute stream (device::cuda_stream). The trainer starts
// step s+1's batch this way before it queues step s.
//
// The orderings, and why each is needed:
// - The copy waits for the compute stream's work queued before the upload started (an event
//   recorded there, cudaStreamWaitEvent on the copy stream): the destination is a block of the
//   caching allocator, which reuses freed blocks in compute-stream order, so a kernel queued
//   earlier may still read it. The trainer starts step s+1's copy before queueing step s, so
//   that wait is for the tail of step s-1 only.
// - The compute stream waits for the copy's event (make_wait; the host never blocks on it), and
//   the caller does that before it frees the destination, so the block goes back to the cache
//   owned by the compute stream again.
// - A staging buffer is taken for another upload only after its copy's event completed; the
//   buffers are kept (best fit, at most kMaxBuffers), so cudaHostAlloc (cudaMallocHost, through
//   cuda::PinnedBuffer) runs in the first steps only.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cohort/kernels/cuda/runtime.h"

namespace cohort::device {

class PinnedUploads {
 public:
  // One upload: the staging buffer it went through, and that buffer's use count then.
  struct Ticket {
    size_t buffer = 0;
    uint64_t generation = 0;
  };
  // Buffers kept; past it, an upload waits for a buffer's copy to finish (or replaces an idle
  // buffer too small). The trainer keeps two steps' x and y in flight.
  static constexpr size_t kMaxBuffers = 32;
  // How long an upload waits for a staging buffer before a Timeout (a copy waits for the
  // kernels queued before it, so a hung kernel would otherwise hang the upload).
  static constexpr std::chrono::seconds kBufferTimeout{300};

  // Makes the copy stream and the compute-stream mark on the current device (the caller's).
  PinnedUploads();
  PinnedUploads(const PinnedUploads&) = delete;
  PinnedUploads& operator=(const PinnedUploads&) = delete;

  // Stages src, then queues its copy to dst on the copy stream after `compute`'s queued work.
  Ticket start(void* dst, const void* src, size_t nbytes, cudaStream_t compute);
  // Makes `compute` wait for the ticket's copy (no-op when its buffer has moved on: its copy
  // then finished before the buffer was taken again).
  void make_wait(const Ticket& ticket, cudaStream_t compute);
  uint64_t pinned_allocs() const;

 private:
  struct Buffer {
    std::unique_ptr<cuda::PinnedBuffer> memory;
    cuda::Event done;         // recorded on the copy stream after its latest copy
    uint64_t generation = 0;  // copies it has staged; 0: never used
  };
  // All under mu_. A buffer is idle when its latest copy finished (or it never copied).
  bool idle(const Buffer& b) const;
  size_t take(size_t nbytes);  // the index of a buffer of at least nbytes, idle
  std::optional<size_t> best_idle(size_t nbytes, size_t max_size) const;
  std::optional<size_t> first_idle() const;
  void wait_for_a_buffer() const;

  mutable std::mutex mu_;
  cuda::Stream copy_;
  cuda::Event compute_mark_;  // the compute stream's position when an upload starts
  std::vector<std::unique_ptr<Buffer>> buffers_;
  uint64_t pinned_allocs_ = 0;
};

}  // namespace cohort::device
