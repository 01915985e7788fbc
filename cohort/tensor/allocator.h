#pragma once
// A caching host allocator. Freed blocks go to a free list keyed by their rounded size and are
// handed out again, so a training step, which allocates the same sizes every iteration, does
// no heap allocation after the first step (see tests/unit/allocator_test.cc).
//
// One per process, like PyTorch's CachingHostAllocator: memory is a process resource.
#include <cstddef>
#include <cstdint>

namespace cohort {

struct AllocatorStats {
  uint64_t system_allocs = 0;  // blocks obtained from the OS (aligned_alloc)
  uint64_t cache_hits = 0;     // blocks served from the free lists
  uint64_t bytes_in_use = 0;   // handed out, not yet returned
  uint64_t bytes_cached = 0;   // returned, kept for reuse
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();
  // 64-byte aligned (a cache line; enough for AVX-512). Never returns null: throws IoError.
  void* allocate(size_t nbytes, size_t* rounded);
  void deallocate(void* p, size_t rounded);
  AllocatorStats stats() const;
  // Returns every cached block to the OS.
  void empty_cache();
  // Rounds a request up to its size class: 64 B steps below 4 KiB, then 8 steps per power of 2.
  static size_t round_size(size_t nbytes);

 private:
  CpuAllocator() = default;
  struct Impl;
  Impl* impl();
};

}  // namespace cohort
