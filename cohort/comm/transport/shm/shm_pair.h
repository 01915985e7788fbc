#pragma once
// Shared-memory Pair for peers on one host: no kernel copy on the data path.
//
// One segment per pair (a /dev/shm file created by the lower rank, mapped by both, unlinked as
// soon as the higher rank has mapped it). It holds a control page and two single-producer
// single-consumer byte rings, one per direction:
//
//   control page: magic, version, ring size, pid[2], closed[2],
//                 ring[d].head (producer's cache line), ring[d].tail (consumer's cache line)
//   ring 0 data:  lower rank -> higher rank
//   ring 1 data:  higher rank -> lower rank
//
// head and tail count bytes since creation (never wrap). A message is a 48-byte frame
// (magic, length, Header) then the payload, padded to 8 bytes, so frames and elements stay
// aligned. Large messages stream through the ring in chunks: the sender publishes head every
// chunk and the receiver copies (or reduces) and publishes tail as data arrives, so both run
// at once. Progress is made by whichever thread waits (Context::wait), no helper thread.
//
// Messages of at least DeviceOptions::shm_single_copy_bytes skip the ring where the kernel
// allows it (single_copy.h): the frame carries the address of the sender's buffer instead of
// the payload, the receiver reads (or reduces) straight out of it with process_vm_readv and
// then bumps an acknowledgement counter in the control page, which completes the send. The
// sender keeps posting frames meanwhile, so a collective's chunks are all in flight at once and
// the receiver does the copying: a busy or descheduled sender does not stall its peer.
//
// A dead peer has no EOF here: closed[] is set by an orderly close or abort, and while waiting
// the pair checks every few ms that the peer's process still runs (/proc/<pid>/stat).
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/transport/transport.h"

namespace cohort::comm::transport {

namespace shm {
struct Control;
}

class ShmPair : public Pair {
 public:
  // Lower rank: creates the segment; *name receives what to publish for the peer.
  static std::unique_ptr<ShmPair> create(int rank, int peer, const DeviceOptions& dev,
                                         std::string* name);
  // Higher rank: maps the segment the peer created and unlinks its name.
  static std::unique_ptr<ShmPair> open(int rank, int peer, const DeviceOptions& dev,
                                       const std::string& name);
  ~ShmPair() override;

  // Adds the bytes of every single-copy message this side reads to *counter (the context's).
  void count_single_copy_in(std::atomic<uint64_t>* counter) { single_copy_counter_ = counter; }

  // Once the peer has mapped the segment: finds out whether this side may read the peer's
  // memory and publishes the answer (senders to this side use single copy only after it).
  // A pair whose peer sends first may see its first large messages take the ring.
  void probe_single_copy();

  // The creator unlinks the name once the peer has mapped it (or on destruction).
  void unlink_name();

  const char* kind() const override { return "shm"; }
  void post(const std::shared_ptr<OpState>& op) override;
  bool progress() override;
  bool caller_driven() const override { return true; }
  void abort(std::exception_ptr why) override;
  void close() override;
  bool sleep_until_peer(Clock::time_point until, Notifier* local, uint64_t seen) override;
  bool peer_left() const override;

 private:
  ShmPair(int rank, int peer, const DeviceOptions& dev);
  void map(int fd, bool create);
  void prefault(bool create);  // touches every ring page once (see the .cc)
  bool advance(bool check_peer);
  bool progress_send(OpState& op);
  bool progress_recv(OpState& op);
  bool read_frame(OpState& op);
  // Single copy (see above and single_copy.h).
  bool use_single_copy(const OpState& op);
  bool post_single_copy_frame(OpState& op);
  bool reap_single_copy_acks();  // completes sends the receiver has read
  bool pull_single_copy(OpState& op);
  void read_single_copy_descriptor(OpState& op);
  void write_bytes(const void* src, size_t n);  // at tx_head_, wrapping
  void read_bytes(void* dst, size_t n);         // at rx_tail_, wrapping
  size_t tx_free();
  void check_peer(OpState& op);  // fails op (and the pair) if the peer closed or died
  void break_pair(std::exception_ptr why);
  void ring_peer();  // after publishing progress: wakes the peer if it sleeps (Doorbell)

  int rank_;
  int side_;  // 0: lower rank of the pair
  size_t ring_bytes_;
  size_t chunk_;
  std::string name_;  // non-empty while this side still has to unlink it
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  shm::Control* ctl_ = nullptr;
  char* tx_data_ = nullptr;
  char* rx_data_ = nullptr;
  // Local copies: only this side writes tx head and rx tail.
  uint64_t tx_head_ = 0;
  uint64_t tx_tail_seen_ = 0;
  uint64_t rx_tail_ = 0;
  uint64_t send_seq_ = 0;
  uint64_t recv_seq_ = 0;
  std::deque<std::shared_ptr<OpState>> sends_, recvs_;
  // Single copy: sends whose frame is out, waiting for the receiver's acknowledgement.
  std::deque<std::shared_ptr<OpState>> awaiting_ack_;
  size_t single_copy_bytes_;  // 0: never
  bool deny_single_copy_;
  bool probed_ = false;
  uint64_t single_copy_sent_ = 0;      // frames posted by this side
  uint64_t single_copy_received_ = 0;  // messages this side has read from the peer
  std::vector<char> reduce_staging_;
  std::atomic<uint64_t>* single_copy_counter_ =
      nullptr;  // pieces of a remote buffer on their way to reduce()
  std::exception_ptr broken_;
  bool closed_ = false;
  uint32_t idle_polls_ = 0;
  Clock::time_point next_liveness_check_{};
};

}  // namespace cohort::comm::transport
