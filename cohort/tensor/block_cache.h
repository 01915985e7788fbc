#pragma once
// Freed blocks kept for reuse, by exact size (a size class: CpuAllocator::round_size). The CPU
// allocator keeps its free blocks this way and so does a device's caching allocator
// (device/cuda_memory.cc): a training step allocates the same sizes every time, so after the
// first step every request is served from the cache and none reaches the system (malloc,
// cudaMalloc).
//
// Not thread-safe: the owner calls it under its own lock.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cohort {

class BlockCache {
 public:
  // At most `max_cached` bytes are kept; a block that would pass it is not taken (put()).
  explicit BlockCache(uint64_t max_cached) : max_cached_(max_cached) {}

  // A cached block of exactly `size` bytes, removed from the cache; null when there is none.
  void* take(size_t size) {
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }

  // Keeps `p` (of `size` bytes) for reuse; false when that would pass the cap, and then the
  // caller gives it back to the system.
  bool put(void* p, size_t size) {
    if (cached_ + size > max_cached_) return false;
    free_[size].push_back(p);
    cached_ += size;
    return true;
  }

  // Empties the cache, handing every block to free_block(p, size).
  template <typename FreeBlock>
  void drain(FreeBlock free_block) {
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) free_block(p, size);
    free_.clear();
    cached_ = 0;
  }

  uint64_t bytes_cached() const { return cached_; }

 private:
  std::unordered_map<size_t, std::vector<void*>> free_;
  uint64_t cached_ = 0;
  uint64_t max_cached_;
};

}  // namespace cohort
