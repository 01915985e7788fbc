#include "cohort/comm/transport/shm/shm_pair.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "cohort/comm/reduce.h"
#include "cohort/comm/transport/backoff.h"
#include "cohort/comm/transport/futex.h"
#include "cohort/comm/transport/shm/shm_segment.h"
#include "cohort/comm/transport/shm/single_copy.h"
#include "cohort/core/logging.h"
#include "cohort/net/secret.h"

namespace cohort::comm::transport {

using namespace shm;

namespace {

size_t pad8(size_t n) {
  return (8 - (n & 7)) & 7;
}

std::string errno_text() {
  return std::strerror(errno);
}

// True unless /proc says the process is gone or a zombie (a killed child not yet reaped
// still answers kill(pid, 0)).
bool process_alive(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace

ShmPair::ShmPair(int rank, int peer, const DeviceOptions& dev)
    : Pair(peer),
      rank_(rank),
      side_(rank < peer ? 0 : 1),
      ring_bytes_(dev.shm_ring_bytes),
      chunk_(std::min<size_t>(size_t{64} << 10, dev.shm_ring_bytes / 4)),
      single_copy_bytes_(dev.shm_single_copy_bytes),
      deny_single_copy_(dev.faults.deny_single_copy) {}

std::unique_ptr<ShmPair> ShmPair::create(int rank, int peer, const DeviceOptions& dev,
                                         std::string* name) {
  std::unique_ptr<ShmPair> p(new ShmPair(rank, peer, dev));
  uint8_t rnd[8];
  net::random_bytes(rnd);
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
  p->name_ = detail::str("/cohort-", hex, "-", rank, "-", peer);
  int fd = ::shm_open(p->name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  COHORT_CHECK_IO(fd >= 0, "shm transport: cannot create /dev/shm", p->name_, " for rank ", peer,
                  ": ", errno_text());
  p->map(fd, /*create=*/true);
  *name = p->name_;
  return p;
}

std::unique_ptr<ShmPair> ShmPair::open(int rank, int peer, const DeviceOptions& dev,
                                       const std::string& name) {
  std::unique_ptr<ShmPair> p(new ShmPair(rank, peer, dev));
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  COHORT_CHECK_IO(fd >= 0, "shm transport: cannot open /dev/shm", name, " created by rank ", peer,
                  ": ", errno_text(), " (is rank ", peer, " on this host?)");
  ::shm_unlink(name.c_str());  // both sides have it now (or the creator unlinks on failure)
  p->map(fd, /*create=*/false);
  return p;
}

void ShmPair::map(int fd, bool create) {
  map_bytes_ = kControlBytes + 2 * ring_bytes_;
  int err = 0;
  if (create) {
    // Allocate the pages now (not just size the file): prefault() touches all of them, which
    // on a full /dev/shm would be a SIGBUS rather than this error.
    err = ::ftruncate(fd, off_t(map_bytes_)) != 0 ? errno
                                                  : ::posix_fallocate(fd, 0, off_t(map_bytes_));
  }
  if (err != 0) {
    ::close(fd);
    unlink_name();
    throw IoError(detail::str("shm transport: cannot allocate ", map_bytes_, " bytes of /dev/shm",
                              name_, " (is /dev/shm full?): ", std::strerror(err)));
  }
  struct stat st {};
  bool size_ok = ::fstat(fd, &st) == 0 && size_t(st.st_size) == map_bytes_;
  // MAP_POPULATE: fault every page in now. Otherwise the first pass of the head through the
  // ring takes a page fault per 4 KiB on both sides (very costly under virtualisation), which
  // made small-message latency 10-100x worse until the ring had wrapped once (1 MiB of traffic).
  void* addr = size_ok ? ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_POPULATE, fd, 0)
                       : MAP_FAILED;
  err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) {
    unlink_name();
    COHORT_CHECK_IO(size_ok, "shm transport: segment for rank ", peer(), " has ", st.st_size,
                    " bytes, expected ", map_bytes_, " (do all ranks use the same ring size?)");
    throw IoError(detail::str("shm transport: cannot map the segment shared with rank ", peer(),
                              ": ", std::strerror(err)));
  }
  map_ = addr;
  ctl_ = static_cast<Control*>(addr);
  char* rings = static_cast<char*>(addr) + kControlBytes;
  tx_data_ = rings + side_ * ring_bytes_;
  rx_data_ = rings + (1 - side_) * ring_bytes_;
  if (create) {
    ctl_->version = kSegmentVersion;
    ctl_->ring_bytes = ring_bytes_;
    ctl_->magic.store(kSegmentMagic, std::memory_order_release);
  } else {
    COHORT_CHECK_IO(ctl_->magic.load(std::memory_order_acquire) == kSegmentMagic &&
                        ctl_->version == kSegmentVersion && ctl_->ring_bytes == ring_bytes_,
                    "shm transport: the segment shared with rank ", peer(),
                    " has a bad header (magic/version/ring size); is it another cohort version?");
  }
  prefault(create);
  ctl_->base[side_].store(reinterpret_cast<uint64_t>(ctl_), std::memory_order_relaxed);
  ctl_->pid[side_].store(int32_t(::getpid()), std::memory_order_release);
}

// MAP_POPULATE spares the guest page faults, but under virtualisation the first access to
// each page still costs microseconds (measured ~4.5 us a page here, shadow paging), which made
// small messages 10x slower until the ring had wrapped once (1 MiB of traffic). So touch every
// page now, the way it will be used: write what this side writes, read what it only reads.
// Only writes that cannot race with the peer: the creator writes before publishing the name;
// the opener writes its own tx ring, which nobody else writes and the peer reads only below
// the head this side publishes (0 until it sends).
void ShmPair::prefault(bool create) {
  constexpr size_t kPage = 4096;
  if (create) {
    std::memset(tx_data_ < rx_data_ ? tx_data_ : rx_data_, 0, 2 * ring_bytes_);
    return;
  }
  std::memset(tx_data_, 0, ring_bytes_);
  volatile char sink = 0;
  for (size_t off = 0; off < ring_bytes_; off += kPage) sink = sink + rx_data_[off];
}

ShmPair::~ShmPair() {
  close();
  unlink_name();
  if (map_) ::munmap(map_, map_bytes_);
}

void ShmPair::unlink_name() {
  if (!name_.empty() && side_ == 0) ::shm_unlink(name_.c_str());
  name_.clear();
}

void ShmPair::post(const std::shared_ptr<OpState>& op) {
  op->peer = peer();
  op->seq = op->kind == OpKind::kSend ? send_seq_++ : recv_seq_++;
  if (broken_) return fail(*op, broken_);
  if (closed_) {
    return fail(*op, std::make_exception_ptr(IoError(detail::str("shm transport: ", op->describe(),
                                                                 " posted after this rank (", rank_,
                                                                 ") closed the pair"))));
  }
  if (!probed_) probe_single_copy();
  auto& queue = op->kind == OpKind::kSend ? sends_ : recvs_;
  queue.push_back(op);
  if (queue.size() == 1) progress();  // start at once: small messages finish right here
}

bool ShmPair::progress() {
  return advance(/*check_peer=*/true);
}

void ShmPair::ring_peer() {
  Doorbell& door = ctl_->door[1 - side_];
  // Dekker with sleep_until_peer: our stores of progress before the load of `sleeping`, the
  // sleeper's store of `sleeping` before its look at our progress. One of us sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (door.sleeping.load(std::memory_order_relaxed) == 0) return;
  door.bell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&door.bell);
}

bool ShmPair::peer_left() const {
  return broken_ || !ctl_ || ctl_->closed[1 - side_].load(std::memory_order_acquire) != 0;
}

bool ShmPair::sleep_until_peer(Clock::time_point until, Notifier* local, uint64_t seen) {
  if (broken_ || closed_ || !ctl_) return false;
  Doorbell& door = ctl_->door[side_];
  door.sleeping.store(1, std::memory_order_seq_cst);
  if (local) local->also_ring(&door.bell);
  // Undone on every way out: `local` must not keep ringing a word in a segment that may be
  // unmapped after this returns (or throws).
  struct Awake {
    Doorbell& door;
    Notifier* local;
    ~Awake() {
      if (local) local->also_ring(nullptr);
      door.sleeping.store(0, std::memory_order_relaxed);
    }
  } awake{door, local};
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint32_t bell = door.bell.load(std::memory_order_seq_cst);
  // Whatever the peer published before it could see `sleeping` is found here instead.
  const bool news = progress() || (local && local->generation() != seen);
  if (!news) futex_wait(&door.bell, bell, until);
  return true;
}

bool ShmPair::advance(bool check) {
  bool moved = false;
  // break_pair() empties both queues, hence the re-checks after each step.
  while (!sends_.empty()) {
    OpState& op = *sends_.front();
    moved |= progress_send(op);
    if (sends_.empty()) break;
    if (op.single_copy && op.header_done && !op.finished()) {
      awaiting_ack_.push_back(std::move(sends_.front()));  // the next frame may go out now
    } else if (!op.finished()) {
      break;
    }
    sends_.pop_front();
  }
  if (!awaiting_ack_.empty()) moved |= reap_single_copy_acks();
  while (!recvs_.empty()) {
    OpState& op = *recvs_.front();
    moved |= progress_recv(op);
    if (!op.finished() || recvs_.empty()) break;
    recvs_.pop_front();
  }
  if (moved) {
    idle_polls_ = 0;
    ring_peer();
  } else if (check && (!sends_.empty() || !recvs_.empty() || !awaiting_ack_.empty())) {
    check_peer(!recvs_.empty()   ? *recvs_.front()
               : !sends_.empty() ? *sends_.front()
                                 : *awaiting_ack_.front());
  }
  return moved;
}

size_t ShmPair::tx_free() {
  size_t free = ring_bytes_ - size_t(tx_head_ - tx_tail_seen_);
  if (free < chunk_) {
    tx_tail_seen_ = ctl_->ring[side_].tail.load(std::memory_order_acquire);
    free = ring_bytes_ - size_t(tx_head_ - tx_tail_seen_);
  }
  return free;
}

void ShmPair::write_bytes(const void* src, size_t n) {
  size_t off = size_t(tx_head_) & (ring_bytes_ - 1);
  size_t first = std::min(n, ring_bytes_ - off);
  std::memcpy(tx_data_ + off, src, first);
  std::memcpy(tx_data_, static_cast<const char*>(src) + first, n - first);
  tx_head_ += n;
}

void ShmPair::read_bytes(void* dst, size_t n) {
  size_t off = size_t(rx_tail_) & (ring_bytes_ - 1);
  size_t first = std::min(n, ring_bytes_ - off);
  std::memcpy(dst, rx_data_ + off, first);
  std::memcpy(static_cast<char*>(dst) + first, rx_data_, n - first);
  rx_tail_ += n;
}

bool ShmPair::progress_send(OpState& op) {
  auto& head = ctl_->ring[side_].head;
  bool moved = false;
  if (!op.header_done && use_single_copy(op)) return post_single_copy_frame(op);
  if (!op.header_done) {
    if (tx_free() < sizeof(Frame)) return false;
    Frame f{kFrameMagic, 0, op.bytes, op.header};
    write_bytes(&f, sizeof(f));
    op.header_done = moved = true;
  }
  while (op.done_bytes < op.bytes) {
    size_t free = tx_free();
    if (free == 0) break;
    size_t off = size_t(tx_head_) & (ring_bytes_ - 1);
    size_t n = std::min({op.bytes - op.done_bytes, free, ring_bytes_ - off, chunk_});
    std::memcpy(tx_data_ + off, op.data + op.done_bytes, n);
    tx_head_ += n;
    op.done_bytes += n;
    head.store(tx_head_, std::memory_order_release);
    moved = true;
  }
  if (op.done_bytes == op.bytes) {
    size_t pad = pad8(op.bytes);
    if (tx_free() >= pad) {
      tx_head_ += pad;
      finish(op);
      moved = true;
    }
  }
  if (moved) head.store(tx_head_, std::memory_order_release);
  return moved;
}

bool ShmPair::read_frame(OpState& op) {
  uint64_t head = ctl_->ring[1 - side_].head.load(std::memory_order_acquire);
  if (head - rx_tail_ < sizeof(Frame)) return false;
  Frame f;
  read_bytes(&f, sizeof(f));
  if (f.magic != kFrameMagic) {
    auto e = std::make_exception_ptr(
        IoError(detail::str("shm transport: ", op.describe(), ": bad frame magic 0x", std::hex,
                            f.magic, " (expected 0x", kFrameMagic,
                            "); the segment shared with rank ", std::dec, peer(), " is corrupt")));
    break_pair(e);
    return true;
  }
  if (f.bytes != op.bytes || !(f.header == op.header)) {
    auto e = std::make_exception_ptr(
        Mismatch(detail::str("shm transport: ", op.describe(), " expected ", op.bytes,
                             " bytes with tag ", op.header.tag, ", rank ", peer(), " sent ",
                             f.bytes, " bytes with tag ", f.header.tag),
                 peer(), op.header, op.bytes, f.header, f.bytes));
    break_pair(e);
    return true;
  }
  op.header_done = true;
  if (f.flags & kSingleCopy) read_single_copy_descriptor(op);
  return true;
}

bool ShmPair::progress_recv(OpState& op) {
  bool moved = false;
  if (!op.header_done) {
    if (!read_frame(op)) return false;
    if (op.finished()) return true;  // failed on a bad frame
    moved = true;
  }
  if (op.single_copy) return pull_single_copy(op);
  auto& tail = ctl_->ring[1 - side_].tail;
  size_t esz = op.reduce ? dtype_size(op.reduce_spec.dtype) : 1;
  while (op.done_bytes < op.bytes) {
    uint64_t head = ctl_->ring[1 - side_].head.load(std::memory_order_acquire);
    size_t avail = size_t(head - rx_tail_);
    size_t off = size_t(rx_tail_) & (ring_bytes_ - 1);
    size_t n = std::min({op.bytes - op.done_bytes, avail, ring_bytes_ - off, chunk_});
    n -= n % esz;
    if (n == 0) break;
    char* dst = op.data + op.done_bytes;
    if (op.reduce) {
      reduce(op.reduce_spec.dtype, op.reduce_spec.op, dst, rx_data_ + off, dst, n / esz);
    } else {
      std::memcpy(dst, rx_data_ + off, n);
    }
    rx_tail_ += n;
    op.done_bytes += n;
    tail.store(rx_tail_, std::memory_order_release);
    moved = true;
  }
  if (op.done_bytes == op.bytes) {
    // The sender publishes the padding with (or after) the last payload bytes.
    uint64_t head = ctl_->ring[1 - side_].head.load(std::memory_order_acquire);
    size_t pad = pad8(op.bytes);
    if (head - rx_tail_ >= pad) {
      rx_tail_ += pad;
      tail.store(rx_tail_, std::memory_order_release);
      finish(op);
      moved = true;
    }
  }
  return moved;
}

void ShmPair::check_peer(OpState& op) {
  int peer_side = 1 - side_;
  if (ctl_->closed[peer_side].load(std::memory_order_acquire)) {
    // Data the peer wrote before closing is still ours to read.
    if (advance(/*check_peer=*/false)) return;
    std::string why(ctl_->reason[peer_side],
                    strnlen(ctl_->reason[peer_side], sizeof(ctl_->reason[0]) - 1));
    std::string where = detail::str(" during ", op.describe(), " (", op.done_bytes, " of ",
                                    op.bytes, " bytes transferred)");
    break_pair(std::make_exception_ptr(IoError(
        why.empty() ? detail::str("shm transport: rank ", peer(), " closed its connection to rank ",
                                  rank_, where, "; check rank ", peer(), "'s log for its error")
                    : detail::str("shm transport: rank ", peer(),
                                  " aborted its connection to rank ", rank_, where, ": ", why))));
    return;
  }
  if (++idle_polls_ % 64 != 0) return;
  auto now = Clock::now();
  if (now < next_liveness_check_) return;
  next_liveness_check_ = now + kLivenessInterval;
  int pid = ctl_->pid[peer_side].load(std::memory_order_acquire);
  if (pid > 0 && !process_alive(pid)) {
    // A peer that wrote its last message and exited between our poll and this check is
    // not a failure: what it wrote before exiting is still ours to read.
    if (advance(/*check_peer=*/false)) return;
    if (ctl_->closed[peer_side].load(std::memory_order_acquire)) return;  // next poll says why
    break_pair(std::make_exception_ptr(IoError(
        detail::str("shm transport: rank ", peer(), " (pid ", pid, ") died during ", op.describe(),
                    " (", op.done_bytes, " of ", op.bytes, " bytes transferred)"))));
  }
}

void ShmPair::break_pair(std::exception_ptr why) {
  if (!broken_) broken_ = why;
  for (auto* queue : {&sends_, &recvs_, &awaiting_ack_}) {
    for (auto& op : *queue) fail(*op, why);
    queue->clear();
  }
  // Tell the peer at once (and why) instead of letting it run into its deadline.
  if (ctl_ && !ctl_->closed[side_].load(std::memory_order_relaxed)) {
    std::string reason = what_of(why);
    size_t n = std::min(reason.size(), sizeof(ctl_->reason[0]) - 1);
    std::memcpy(ctl_->reason[side_], reason.data(), n);
    ctl_->reason[side_][n] = 0;
    ctl_->closed[side_].store(1, std::memory_order_release);
    ring_peer();
  }
}

void ShmPair::abort(std::exception_ptr why) {
  break_pair(std::move(why));
}

void ShmPair::close() {
  if (closed_) return;
  closed_ = true;
  if (!sends_.empty() || !recvs_.empty() || !awaiting_ack_.empty()) {
    break_pair(std::make_exception_ptr(
        IoError(detail::str("shm transport: rank ", rank_, " closed its pair with rank ", peer(),
                            " with operations pending"))));
  }
  if (ctl_) {
    ctl_->closed[side_].store(1, std::memory_order_release);
    ring_peer();
  }
}

}  // namespace cohort::comm::transport
