#pragma once
// A caching host allocator. Freed blocks go to a free list keyed by their rounded size and are
// handed out again, so a training step, which allocates the same sizes every iteration, does
// no heap allocation after the first step (see tests/unit/steady_state_test.cc).
//
// One per process, like PyTorch's CachingHostAllocator: memory is a process resource. So are
// its accounting and its limit: ranks run as threads of one process share them.
//
// Accounting (docs/memory.md): bytes in use by MemoryKind, their peaks, and an optional limit
// on the total. Bytes are the rounded block sizes handed out (round_size), so a tensor of n
// float32 elements counts round_size(4n) bytes: 4n rounded up to 64 B below 4 KiB, and at
// most 12.5% more above. External memory a tensor views (a communicator's shared arena)
// counts, at its exact size, once it is tagged (tag_memory, tensor.h); until then it is not
// counted.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cohort/core/error.h"
#include "cohort/tensor/memory_kind.h"

namespace cohort {

struct AllocatorStats {
  uint64_t system_allocs = 0;  // blocks obtained from the OS (aligned_alloc)
  uint64_t cache_hits = 0;     // blocks served from the free lists
  uint64_t bytes_in_use = 0;   // handed out, not yet returned (external memory not included)
  uint64_t bytes_cached = 0;   // returned, kept for reuse
};

// Bytes in use by kind (allocator blocks plus tagged external memory) and their peaks since
// the last reset_peak(). Cached free blocks are not in use.
struct MemoryUsage {
  std::array<uint64_t, kMemoryKinds> bytes{};       // in use now
  std::array<uint64_t, kMemoryKinds> peak_bytes{};  // most of each kind in use at once
  uint64_t total = 0;                               // sum of `bytes`
  uint64_t peak_total = 0;                          // most in use at once, all kinds together
  uint64_t limit = 0;                               // set_limit; 0: none
  uint64_t operator[](MemoryKind k) const { return bytes[size_t(k)]; }
  uint64_t peak(MemoryKind k) const { return peak_bytes[size_t(k)]; }
};

// An allocation would take the bytes in use past the limit (CpuAllocator::set_limit). The
// message names the request, the bytes in use by kind, the limit and what set it.
class MemoryLimitExceeded : public ErrorKind<MemoryLimitExceeded, Error> {
 public:
  using ErrorKind::ErrorKind;
};

class CpuAllocator {
 public:
  static CpuAllocator& instance();
  // 64-byte aligned (a cache line; enough for AVX-512), counted as `kind`. Never returns null:
  // throws MemoryLimitExceeded over the limit, IoError when the OS has no memory.
  void* allocate(size_t nbytes, size_t* rounded, MemoryKind kind);
  // `rounded` and `kind` as the block was allocated, or as last moved by move_bytes.
  void deallocate(void* p, size_t rounded, MemoryKind kind);
  AllocatorStats stats() const;
  MemoryUsage usage() const;
  // Starts the peaks over from the bytes in use now.
  void reset_peak();
  // At most `bytes` in use (0: no limit); `set_by` names the setting in the error message
  // (e.g. "run.memory_limit_mb"). Takes effect for the next allocation; nothing is freed.
  void set_limit(uint64_t bytes, std::string set_by = "CpuAllocator::set_limit");
  // Moves `bytes` from one kind's count to another's (tag_memory). kCount stands for "not
  // counted": external memory entering (from = kCount) or leaving (to = kCount) the count.
  void move_bytes(size_t bytes, MemoryKind from, MemoryKind to);
  // Returns every cached block to the OS.
  void empty_cache();
  // Rounds a request up to its size class: 64 B steps below 4 KiB, then 8 steps per power of 2.
  static size_t round_size(size_t nbytes);

 private:
  CpuAllocator() = default;
  struct Impl;
  Impl* impl();
};

// "1.5 MiB": bytes in B, KiB, MiB or GiB, one decimal (messages and summaries).
std::string format_bytes(uint64_t bytes);

}  // namespace cohort
