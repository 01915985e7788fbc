#include "cohort/device/pinned_uploads.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>

#include "cohort/tensor/allocator.h"

namespace cohort::device {

PinnedUploads::PinnedUploads() = default;

PinnedUploads::Ticket PinnedUploads::start(void* dst, const void* src, size_t nbytes,
                                           cudaStream_t compute) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t i = take(nbytes);
  Buffer& b = *buffers_[i];
  std::memcpy(b.memory->data(), src, nbytes);  // src is the caller's again when this returns
  // After the compute stream's queued work: dst may be a block a queued kernel still reads.
  compute_mark_.record(compute);
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), compute_mark_.get(), 0));
  COHORT_CUDA_CHECK(
      cudaMemcpyAsync(dst, b.memory->data(), nbytes, cudaMemcpyHostToDevice, copy_.get()));
  b.done.record(copy_.get());
  ++b.generation;
  return {i, b.generation};
}

void PinnedUploads::make_wait(const Ticket& ticket, cudaStream_t compute) {
  std::lock_guard<std::mutex> lock(mu_);
  const Buffer& b = *buffers_.at(ticket.buffer);
  // A buffer is taken again only once its copy's event completed: then nothing is left to wait
  // for, and its event now marks a later copy that this consumer need not wait for.
  if (b.generation != ticket.generation) return;
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(compute, b.done.get(), 0));
}

uint64_t PinnedUploads::pinned_allocs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_allocs_;
}

bool PinnedUploads::idle(const Buffer& b) const {
  if (b.generation == 0) return true;
  const cudaError_t e = cudaEventQuery(b.done.get());
  if (e == cudaErrorNotReady) return false;
  COHORT_CUDA_CHECK(e);
  return true;
}

// Under mu_: the smallest idle buffer that holds nbytes and is at most twice its size; else a
// new one while there are fewer than kMaxBuffers; else the smallest idle one that holds it; else
// an idle one made larger; else the first buffer whose copy finishes. The size bound keeps the
// labels' small uploads off the inputs' large buffers, so the pool stops growing after the first
// steps instead of chasing buffers taken by the wrong size.
size_t PinnedUploads::take(size_t nbytes) {
  const size_t size = CpuAllocator::round_size(nbytes);
  for (;;) {
    if (std::optional<size_t> i = best_idle(nbytes, 2 * size)) return *i;
    std::optional<size_t> i;
    if (buffers_.size() < kMaxBuffers) {
      buffers_.push_back(std::make_unique<Buffer>());
      i = buffers_.size() - 1;
    } else if (std::optional<size_t> any = best_idle(nbytes, SIZE_MAX)) {
      return *any;
    } else {
      i = first_idle();  // idle, but too small
    }
    if (i) {
      Buffer& b = *buffers_[*i];
      b.memory.reset();  // its copy finished (idle): cudaFreeHost before the larger one is made
      b.memory = std::make_unique<cuda::PinnedBuffer>(size);
      ++pinned_allocs_;
      return *i;
    }
    wait_for_a_buffer();
  }
}

std::optional<size_t> PinnedUploads::best_idle(size_t nbytes, size_t max_size) const {
  std::optional<size_t> best;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = *buffers_[i];
    if (!b.memory || b.memory->size() < nbytes || b.memory->size() > max_size) continue;
    if ((!best || b.memory->size() < buffers_[*best]->memory->size()) && idle(b)) best = i;
  }
  return best;
}

std::optional<size_t> PinnedUploads::first_idle() const {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (idle(*buffers_[i])) return i;
  return std::nullopt;
}

// Polls rather than cudaEventSynchronize, which has no deadline: a copy waits for the kernels
// queued before it, and a hung kernel must end in an error, not a hung trainer.
void PinnedUploads::wait_for_a_buffer() const {
  const auto deadline = std::chrono::steady_clock::now() + kBufferTimeout;
  for (;;) {
    if (first_idle()) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Timeout(detail::str("CUDA upload: all ", buffers_.size(),
                                " page-locked staging buffers still copying after ",
                                kBufferTimeout.count(),
                                " s (each copy waits for the kernels queued before it: is a kernel "
                                "hung?)"));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace cohort::device
