#include "cohort/tensor/allocator.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cohort/core/error.h"

namespace cohort {

struct CpuAllocator::Impl {
  mutable std::mutex mu;  // guards everything below
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  AllocatorStats stats;
  // Above this many cached bytes, returned blocks go back to the OS instead.
  static constexpr uint64_t kMaxCached = uint64_t(8) << 30;
};

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator a;
  return a;
}

CpuAllocator::Impl* CpuAllocator::impl() {
  static Impl i;  // never destroyed before tensors in static storage are
  return &i;
}

size_t CpuAllocator::round_size(size_t n) {
  if (n == 0) n = 1;
  if (n <= 4096) return (n + 63) & ~size_t(63);
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of 2 below n
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

void* CpuAllocator::allocate(size_t nbytes, size_t* rounded) {
  size_t size = round_size(nbytes);
  *rounded = size;
  Impl* s = impl();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    auto it = s->free_lists.find(size);
    if (it != s->free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      s->stats.cache_hits++;
      s->stats.bytes_cached -= size;
      s->stats.bytes_in_use += size;
      return p;
    }
    s->stats.system_allocs++;
    s->stats.bytes_in_use += size;
  }
  void* p = std::aligned_alloc(64, size);
  COHORT_CHECK_IO(p != nullptr, "out of host memory allocating ", size, " bytes");
  return p;
}

void CpuAllocator::deallocate(void* p, size_t rounded) {
  if (!p) return;
  Impl* s = impl();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stats.bytes_in_use -= rounded;
    if (s->stats.bytes_cached + rounded <= Impl::kMaxCached) {
      s->free_lists[rounded].push_back(p);
      s->stats.bytes_cached += rounded;
      return;
    }
  }
  std::free(p);
}

AllocatorStats CpuAllocator::stats() const {
  Impl* s = const_cast<CpuAllocator*>(this)->impl();
  std::lock_guard<std::mutex> lock(s->mu);
  return s->stats;
}

void CpuAllocator::empty_cache() {
  Impl* s = impl();
  std::lock_guard<std::mutex> lock(s->mu);
  for (auto& [size, list] : s->free_lists)
    for (void* p : list) std::free(p);
  s->free_lists.clear();
  s->stats.bytes_cached = 0;
}

}  // namespace cohort
