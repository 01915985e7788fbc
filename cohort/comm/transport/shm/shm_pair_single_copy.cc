// ShmPair's single-copy path (see shm_pair.h and single_copy.h).
//
//   sender                                   receiver
//   frame{kSingleCopy} + {address, index} -> reads the descriptor, then process_vm_readv
//   (more frames may follow at once)            straight into the recv buffer, or piece by
//                                               piece into a small staging buffer that is
//                                               reduced into it
//   send completes when                   <- ring[sender].single_copy_read = index + 1
//   single_copy_read > index
#include <algorithm>
#include <cstring>

#include "cohort/comm/reduce.h"
#include "cohort/comm/transport/shm/shm_pair.h"
#include "cohort/comm/transport/shm/shm_segment.h"
#include "cohort/comm/transport/shm/single_copy.h"
#include "cohort/core/logging.h"

namespace cohort::comm::transport {

using namespace shm;

namespace {
// Pieces of a reduced single-copy message: small enough to stay in L2 between the read and
// the reduction, large enough that the syscall's cost is amortised.
constexpr size_t kReducePiece = size_t{128} << 10;
}  // namespace

// Reads the magic word where the peer mapped the segment. Done once, by the first post after
// the peer has published its pid and mapping address; until then senders use the ring.
void ShmPair::probe_single_copy() {
  int peer_side = 1 - side_;
  int pid = ctl_->pid[peer_side].load(std::memory_order_acquire);
  if (pid <= 0) return;  // not mapped yet: ask again at the next post
  probed_ = true;
  std::string why;
  bool ok = single_copy_bytes_ > 0 && !deny_single_copy_ &&
            probe_remote_read(pid, ctl_->base[peer_side].load(std::memory_order_relaxed),
                              kSegmentMagic, &why);
  if (!ok && single_copy_bytes_ > 0) {
    log::debug("comm", "shm: single copy from rank ", peer(), " off (",
               deny_single_copy_ ? "denied by fault injection" : why,
               "); large messages go through the ring");
  }
  ctl_->can_read[side_].store(ok ? kCanRead : kCannotRead, std::memory_order_release);
}

bool ShmPair::use_single_copy(const OpState& op) {
  return single_copy_bytes_ > 0 && op.bytes >= single_copy_bytes_ &&
         ctl_->can_read[1 - side_].load(std::memory_order_acquire) == kCanRead;
}

bool ShmPair::post_single_copy_frame(OpState& op) {
  constexpr size_t kBytes = sizeof(Frame) + sizeof(SingleCopyDescriptor);
  if (tx_free() < kBytes) return false;
  Frame f{kFrameMagic, kSingleCopy, op.bytes, op.header};
  SingleCopyDescriptor d{reinterpret_cast<uint64_t>(op.data), single_copy_sent_};
  write_bytes(&f, sizeof(f));
  write_bytes(&d, sizeof(d));
  op.single_copy = true;
  op.single_copy_index = single_copy_sent_++;
  op.header_done = true;
  ctl_->ring[side_].head.store(tx_head_, std::memory_order_release);
  return true;
}

bool ShmPair::reap_single_copy_acks() {
  uint64_t read = ctl_->ring[side_].single_copy_read.load(std::memory_order_acquire);
  bool moved = false;
  while (!awaiting_ack_.empty() && awaiting_ack_.front()->single_copy_index < read) {
    OpState& op = *awaiting_ack_.front();
    op.done_bytes = op.bytes;
    finish(op);
    awaiting_ack_.pop_front();
    moved = true;
  }
  return moved;
}

// The sender publishes frame and descriptor with one head store, so both are here.
void ShmPair::read_single_copy_descriptor(OpState& op) {
  SingleCopyDescriptor d;
  read_bytes(&d, sizeof(d));
  ctl_->ring[1 - side_].tail.store(rx_tail_, std::memory_order_release);
  if (d.index != single_copy_received_) {
    break_pair(std::make_exception_ptr(IoError(detail::str(
        "shm transport: ", op.describe(), ": single-copy message #", d.index, " from rank ", peer(),
        " where #", single_copy_received_, " was due; the segment is corrupt"))));
    return;
  }
  op.single_copy = true;
  op.remote = d.address;
}

bool ShmPair::pull_single_copy(OpState& op) {
  int pid = ctl_->pid[1 - side_].load(std::memory_order_acquire);
  int err = 0;
  if (!op.reduce) {
    err = read_remote(pid, op.remote, op.data, op.bytes);
  } else {
    size_t esz = dtype_size(op.reduce_spec.dtype);
    size_t piece = std::max(esz, kReducePiece / esz * esz);
    if (reduce_staging_.size() < piece) reduce_staging_.resize(piece);
    for (size_t off = 0; off < op.bytes && err == 0; off += piece) {
      size_t n = std::min(piece, op.bytes - off);
      err = read_remote(pid, op.remote + off, reduce_staging_.data(), n);
      if (err == 0) {
        char* dst = op.data + off;
        reduce(op.reduce_spec.dtype, op.reduce_spec.op, dst, reduce_staging_.data(), dst, n / esz);
      }
    }
  }
  if (err != 0) {
    break_pair(std::make_exception_ptr(IoError(
        detail::str("shm transport: ", op.describe(), ": reading ", op.bytes, " bytes from rank ",
                    peer(), " (pid ", pid, ") failed: ", std::strerror(err),
                    " (did it exit or free the buffer of a pending send?)"))));
    return true;
  }
  op.done_bytes = op.bytes;
  if (single_copy_counter_) single_copy_counter_->fetch_add(op.bytes, std::memory_order_relaxed);
  ctl_->ring[1 - side_].single_copy_read.store(++single_copy_received_, std::memory_order_release);
  finish(op);
  return true;
}

}  // namespace cohort::comm::transport
