#include "cohort/comm/transport/shm/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "cohort/core/error.h"
#include "cohort/net/secret.h"

namespace cohort::comm::transport {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kPage = 4096;

std::string random_name(int rank) {
  uint8_t rnd[8];
  net::random_bytes(rnd);
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
  return detail::str("/cohort-arena-", hex, "-", rank);
}

}  // namespace

std::shared_ptr<ShmArena> ShmArena::create(size_t bytes, int rank, std::string* name) {
  std::shared_ptr<ShmArena> a(new ShmArena(bytes, rank));
  a->name_ = random_name(rank);
  int fd = ::shm_open(a->name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  COHORT_CHECK_IO(fd >= 0, "shm arena: cannot create /dev/shm", a->name_, ": ",
                  std::strerror(errno));
  if (::ftruncate(fd, off_t(bytes)) != 0) {
    int err = errno;
    ::close(fd);
    a->unlink_name();
    throw IoError(detail::str("shm arena: cannot size /dev/shm", a->name_, " to ", bytes,
                              " bytes: ", std::strerror(err)));
  }
  a->fd_ = fd;
  a->map(fd);
  a->free_[0] = bytes;
  *name = a->name_;
  return a;
}

std::shared_ptr<ShmArena> ShmArena::open(const std::string& name, int owner) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  COHORT_CHECK_IO(fd >= 0, "shm arena: cannot open /dev/shm", name, " of rank ", owner, ": ",
                  std::strerror(errno), " (is rank ", owner, " on this host?)");
  // Map the size the owner gave it (ranks may configure different sizes): mapping past the end
  // of the file would be a SIGBUS on first touch.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw IoError(detail::str("shm arena: cannot size rank ", owner, "'s arena ", name));
  }
  std::shared_ptr<ShmArena> a(new ShmArena(size_t(st.st_size), owner));
  a->map(fd);
  ::close(fd);
  return a;
}

void ShmArena::map(int fd) {
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  COHORT_CHECK_IO(p != MAP_FAILED, "shm arena: cannot map ", bytes_, " bytes of rank ", owner_,
                  "'s arena: ", std::strerror(errno));
  base_ = static_cast<char*>(p);
}

ShmArena::~ShmArena() {
  unlink_name();
  if (base_) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void ShmArena::unlink_name() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  name_.clear();
}

void* ShmArena::allocate(size_t bytes) {
  COHORT_CHECK_ARG(fd_ >= 0, "shm arena: allocate on rank ", owner_, "'s arena from a peer");
  if (bytes > bytes_) {
    throw IoError(detail::str("shm arena of rank ", owner_, " is full: ", bytes,
                              " bytes requested, the arena has ", bytes_,
                              " (raise DeviceOptions::shm_arena_bytes)"));
  }
  size_t want = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    size_t off = it->first, len = it->second, left = len - want;
    free_.erase(it);
    if (left > 0) free_[off + want] = left;
    // Reserve the pages now: a full /dev/shm is this error, not a SIGBUS later.
    size_t lo = off / kPage * kPage,
           hi = std::min(bytes_, (off + want + kPage - 1) / kPage * kPage);
    int err = ::posix_fallocate(fd_, off_t(lo), off_t(hi - lo));
    if (err != 0) {
      if (left > 0) free_.erase(off + want);  // put the block back whole
      free_[off] = len;
      throw IoError(detail::str("shm arena: /dev/shm has no room for ", bytes,
                                " more bytes: ", std::strerror(err)));
    }
    used_[off] = want;
    return base_ + off;
  }
  throw IoError(detail::str("shm arena of rank ", owner_, " is full: ", bytes, " bytes requested, ",
                            bytes_ - bytes_in_use_locked(), " of ", bytes_,
                            " free (raise DeviceOptions::shm_arena_bytes)"));
}

void ShmArena::release(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(offset_of(p));
  COHORT_CHECK_ARG(it != used_.end(), "shm arena: release of ", p,
                   ", which is not a buffer of rank ", owner_, "'s arena");
  size_t off = it->first, len = it->second;
  used_.erase(it);
  // Merge with the free neighbours on both sides.
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->first == off + len) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      prev->second += len;
      return;
    }
  }
  free_[off] = len;
}

size_t ShmArena::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_in_use_locked();
}

size_t ShmArena::bytes_in_use_locked() const {
  size_t n = 0;
  for (const auto& [off, len] : used_) n += len;
  return n;
}

}  // namespace cohort::comm::transport
