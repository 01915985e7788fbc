#pragma once
// A stand-in for a GPU in tests that run anywhere: host memory registered as cuda:0's
// (tensor/device_memory.h), cached like a real backend and counting what it is asked (an upload
// lands only when the device is told to wait for it, as on a GPU, so a consumer that reads it
// early reads stale bytes); with
// StandInGpu, also the CPU's kernels registered as cuda:0's (dispatch/kernel_table.h). Code that
// handles devices (ops making outputs on their inputs' device, modules and optimizers moving
// with them) then runs its device path on any machine, and must give the CPU's results bit for
// bit, since the same kernels run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "cohort/dispatch/kernel_table.h"
#include "cohort/tensor/allocator.h"
#include "cohort/tensor/block_cache.h"
#include "cohort/tensor/device_memory.h"
#include "cohort/tensor/strided.h"

namespace cohort::testing {

// Host memory posing as cuda:0, cached like a real backend, counting what it is asked.
class StandInDevice final : public DeviceMemory {
 public:
  void* allocate(int index, size_t nbytes, size_t* rounded) override {
    EXPECT_EQ(index, 0);
    *rounded = CpuAllocator::round_size(nbytes);
    stats_.bytes_in_use += *rounded;
    if (void* p = cache_.take(*rounded)) {
      stats_.cache_hits++;
      return p;
    }
    stats_.system_allocs++;
    return std::malloc(*rounded);
  }
  void deallocate(int, void* p, size_t rounded) override {
    // A real GPU's copy could still write into the block after a kernel took it from the cache.
    EXPECT_EQ(std::count(pending_.begin(), pending_.end(), p), 0)
        << "a block was freed while an upload into it was not yet waited for";
    stats_.bytes_in_use -= rounded;
    if (!cache_.put(p, rounded)) std::free(p);
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override {
    copies++;
    std::memcpy(dst, src, nbytes);
  }
  void copy_view(int, View view, void* dst, const void* src, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& strides, size_t elem_size) override {
    (view == View::kSource ? gathers : scatters)++;
    auto* out = static_cast<char*>(dst);
    const auto* in = static_cast<const char*>(src);
    for_each_offset<1>(shape, {&strides}, [&](int64_t off) {
      if (view == View::kSource) {
        std::memcpy(out, in + off * int64_t(elem_size), elem_size);
        out += elem_size;
      } else {
        std::memcpy(out + off * int64_t(elem_size), in, elem_size);
        in += elem_size;
      }
    });
  }
  void zero(int, void* p, size_t nbytes) override {
    zeroes++;
    std::memset(p, 0, nbytes);
  }
  DeviceMemoryStats stats(int) const override { return stats_; }
  std::unique_ptr<PendingUpload> upload_async(int index, void* dst, const void* src,
                                              size_t nbytes) override {
    EXPECT_EQ(index, 0);
    uploads++;
    pending_.push_back(dst);
    return std::make_unique<StagedUpload>(this, dst, src, nbytes);
  }
  ~StandInDevice() override {
    cache_.drain([](void* p, size_t) { std::free(p); });
  }
  int copies = 0, gathers = 0, scatters = 0, zeroes = 0;
  int uploads = 0, upload_waits = 0;  // upload_waits: uploads landed (device_wait or dropped)

 private:
  // src staged at once (the caller may reuse it); dst written when the device waits for it.
  class StagedUpload final : public PendingUpload {
   public:
    StagedUpload(StandInDevice* device, void* dst, const void* src, size_t nbytes)
        : device_(device),
          dst_(dst),
          staged_(static_cast<const char*>(src), static_cast<const char*>(src) + nbytes) {}
    ~StagedUpload() override { device_wait(); }
    void device_wait() override {
      if (!device_) return;
      std::memcpy(dst_, staged_.data(), staged_.size());
      StandInDevice& d = *std::exchange(device_, nullptr);
      d.upload_waits++;
      d.pending_.erase(std::find(d.pending_.begin(), d.pending_.end(), dst_));
    }

   private:
    StandInDevice* device_;
    void* dst_;
    std::vector<char> staged_;
  };

  BlockCache cache_{uint64_t{1} << 30};
  DeviceMemoryStats stats_;
  std::vector<void*> pending_;  // destinations of uploads not yet landed
};

// Registers a StandInDevice and the CPU's kernel table as cuda:0's for its lifetime.
class StandInGpu {
 public:
  StandInGpu() {
    set_device_memory(Device::Kind::kCUDA, &memory);
    dispatch::set_kernel_table(Device::Kind::kCUDA, &dispatch::cpu_table());
  }
  ~StandInGpu() {
    dispatch::set_kernel_table(Device::Kind::kCUDA, nullptr);
    set_device_memory(Device::Kind::kCUDA, nullptr);
  }
  StandInGpu(const StandInGpu&) = delete;
  StandInGpu& operator=(const StandInGpu&) = delete;
  StandInDevice memory;
};

}  // namespace cohort::testing
