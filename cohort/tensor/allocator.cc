#include "cohort/tensor/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cohort/tensor/block_cache.h"

namespace cohort {

struct CpuAllocator::Impl {
  mutable std::mutex mu;  // guards everything below
  // Above 8 GiB cached, returned blocks go back to the OS instead.
  BlockCache cache{uint64_t(8) << 30};
  AllocatorStats stats;
  MemoryUsage usage;
  std::string limit_set_by;

  // Counts `n` more bytes of kind k, raising the peaks. Under mu.
  void add(MemoryKind k, uint64_t n) {
    uint64_t& b = usage.bytes[size_t(k)];
    b += n;
    usage.total += n;
    if (b > usage.peak_bytes[size_t(k)]) usage.peak_bytes[size_t(k)] = b;
    if (usage.total > usage.peak_total) usage.peak_total = usage.total;
  }
  void sub(MemoryKind k, uint64_t n) {
    usage.bytes[size_t(k)] -= n;
    usage.total -= n;
  }
};

namespace {

// The limit error: what was asked, what is held and by whom, and the setting to change.
[[noreturn]] void throw_limit(size_t size, const MemoryUsage& u, const std::string& set_by) {
  std::string kinds;
  for (size_t k = 0; k < kMemoryKinds; ++k)
    kinds +=
        detail::str(k ? ", " : "", memory_kind_name(MemoryKind(k)), " ", format_bytes(u.bytes[k]));
  throw MemoryLimitExceeded(detail::str(
      "memory limit exceeded: allocating ", format_bytes(size), " (", size, " bytes) with ",
      format_bytes(u.total), " (", u.total, " bytes) in use would pass the limit of ",
      format_bytes(u.limit), " (", u.limit, " bytes) set by ", set_by, "; in use: ", kinds,
      "; peak ", format_bytes(u.peak_total)));
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

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

void* CpuAllocator::allocate(size_t nbytes, size_t* rounded, MemoryKind kind) {
  size_t size = round_size(nbytes);
  *rounded = size;
  Impl* s = impl();
  {
    std::unique_lock<std::mutex> lock(s->mu);
    if (s->usage.limit != 0 && s->usage.total + size > s->usage.limit) {
      MemoryUsage u = s->usage;
      std::string by = s->limit_set_by;
      lock.unlock();
      throw_limit(size, u, by);
    }
    s->add(kind, size);
    s->stats.bytes_in_use += size;
    if (void* p = s->cache.take(size)) {
      s->stats.cache_hits++;
      s->stats.bytes_cached = s->cache.bytes_cached();
      return p;
    }
    s->stats.system_allocs++;
  }
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(s->mu);  // uncount what was never handed out
    s->sub(kind, size);
    s->stats.bytes_in_use -= size;
  }
  COHORT_CHECK_IO(p != nullptr, "out of host memory allocating ", size, " bytes");
  return p;
}

void CpuAllocator::deallocate(void* p, size_t rounded, MemoryKind kind) {
  if (!p) return;
  Impl* s = impl();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->sub(kind, rounded);
    s->stats.bytes_in_use -= rounded;
    if (s->cache.put(p, rounded)) {
      s->stats.bytes_cached = s->cache.bytes_cached();
      return;
    }
  }
  std::free(p);
}

void CpuAllocator::move_bytes(size_t bytes, MemoryKind from, MemoryKind to) {
  if (from == to) return;
  Impl* s = impl();
  std::lock_guard<std::mutex> lock(s->mu);
  if (from != MemoryKind::kCount) s->sub(from, bytes);
  if (to != MemoryKind::kCount) s->add(to, bytes);
}

AllocatorStats CpuAllocator::stats() const {
  Impl* s = const_cast<CpuAllocator*>(this)->impl();
  std::lock_guard<std::mutex> lock(s->mu);
  return s->stats;
}

MemoryUsage CpuAllocator::usage() const {
  Impl* s = const_cast<CpuAllocator*>(this)->impl();
  std::lock_guard<std::mutex> lock(s->mu);
  return s->usage;
}

void CpuAllocator::reset_peak() {
  Impl* s = impl();
  std::lock_guard<std::mutex> lock(s->mu);
  s->usage.peak_bytes = s->usage.bytes;
  s->usage.peak_total = s->usage.total;
}

void CpuAllocator::set_limit(uint64_t bytes, std::string set_by) {
  Impl* s = impl();
  std::lock_guard<std::mutex> lock(s->mu);
  s->usage.limit = bytes;
  s->limit_set_by = std::move(set_by);
}

void CpuAllocator::empty_cache() {
  Impl* s = impl();
  std::lock_guard<std::mutex> lock(s->mu);
  s->cache.drain([](void* p, size_t) { std::free(p); });
  s->stats.bytes_cached = 0;
}

}  // namespace cohort
