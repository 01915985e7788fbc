#pragma once
// A rank's shared arena: one /dev/shm segment that this rank allocates buffers from and every
// peer on its host maps too, so a collective can read a peer's buffer in place instead of
// streaming it through a ring (NCCL's registered buffers; the limit bench/shm_limit.cc
// measures). Buffers that are not in an arena still work everywhere, through the rings.
//
// The segment is sparse: pages are reserved (fallocate) when a buffer is allocated, so a full
// /dev/shm is an IoError from allocate() rather than a SIGBUS on first touch. Allocation is
// first-fit over a free list, 64-byte aligned, thread-safe; the arena lives until its last
// buffer and its context are gone (shared_ptr), and its name is unlinked once every peer has
// mapped it, so nothing is left in /dev/shm after a crash.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace cohort::comm::transport {

class ShmArena {
 public:
  // This rank's arena of `bytes` (virtual); *name receives what peers open.
  static std::shared_ptr<ShmArena> create(size_t bytes, int rank, std::string* name);
  // A peer's arena (its own size, whatever this rank's options say), mapped here (read and write:
  // the allgather half reads it, and nobody but its owner writes it).
  static std::shared_ptr<ShmArena> open(const std::string& name, int owner);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  char* base() const { return base_; }
  size_t size() const { return bytes_; }
  bool contains(const void* p, size_t n) const {
    auto* c = static_cast<const char*>(p);
    return c >= base_ && n <= bytes_ && size_t(c - base_) <= bytes_ - n;
  }
  uint64_t offset_of(const void* p) const { return uint64_t(static_cast<const char*>(p) - base_); }

  // Own arena only. IoError when it is full (naming the sizes) or /dev/shm has no room.
  void* allocate(size_t bytes);
  void release(void* p);
  size_t bytes_in_use() const;

  void unlink_name();

 private:
  ShmArena(size_t bytes, int owner) : bytes_(bytes), owner_(owner) {}
  void map(int fd);
  size_t bytes_in_use_locked() const;

  size_t bytes_;
  int owner_;
  int fd_ = -1;  // own arena: kept open to reserve pages on allocation
  char* base_ = nullptr;
  std::string name_;  // non-empty until unlinked
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length
  std::map<size_t, size_t> used_;  // offset -> length
};

}  // namespace cohort::comm::transport
