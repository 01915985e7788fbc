#pragma once
// TCP Pair: one non-blocking, authenticated socket to a peer, full duplex.
//
// Wire format of every message (frame.h): a 48-byte frame header (magic u32, flags u32,
// length u64, Header 32 bytes; little-endian, as the hosts are), then `length` payload bytes.
// On receipt the header is decoded and checked (tcp::decode_frame_header), then its length and
// Header are compared with the posted recv; any difference fails the recv (IoError naming the
// peer, or Mismatch) and breaks the pair, since the stream position is then unknown. A side
// that breaks the pair first sends, if it can, an abort frame (flag 1, payload: its error
// message), so the peer's error says why.
//
// Both the posting thread and the event-loop thread drive the socket, under mu_; every
// read/write is non-blocking, so mu_ is never held across a wait.
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "cohort/comm/transport/backoff.h"
#include "cohort/comm/transport/transport.h"
#include "cohort/net/socket.h"

namespace cohort::comm::transport {

class TcpPair : public Pair {
 public:
  TcpPair(int rank, int peer, net::Fd fd, Notifier* notifier);
  ~TcpPair() override;

  int fd() const { return fd_.get(); }
  const char* kind() const override { return "tcp"; }
  void post(const std::shared_ptr<OpState>& op) override;
  bool progress() override { return false; }
  bool caller_driven() const override { return false; }
  void abort(std::exception_ptr why) override;
  void close() override;
  // Event-loop callback: the socket is readable and/or writable (or failed).
  void on_event(uint32_t events);

 private:
  // Each returns true if an op finished. Called with mu_ held.
  bool drive_locked();
  bool drive_sends_locked();
  bool drive_recvs_locked();
  bool read_header_locked(OpState& op);
  bool read_payload_locked(OpState& op);
  void fail_all_locked(std::exception_ptr why);
  void send_abort_locked(const std::string& reason);
  std::string read_reason_locked(size_t bytes);
  std::exception_ptr socket_error(const char* during, int err);
  std::exception_ptr peer_closed(const OpState* op);

  int rank_;
  net::Fd fd_;
  Notifier* notifier_;
  std::mutex mu_;  // guards everything below; never held across a blocking call
  std::deque<std::shared_ptr<OpState>> sends_, recvs_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
  // Frame header bytes of the front send / recv moved so far.
  size_t send_hdr_done_ = 0;
  unsigned char send_hdr_[48];
  size_t recv_hdr_done_ = 0;
  unsigned char recv_hdr_[48];
  // Staging for reducing recvs: bytes read but not yet folded in (less than one element
  // carries over between reads).
  std::vector<char> staging_;
  size_t staged_ = 0;
  std::exception_ptr broken_;
  bool closed_ = false;
};

}  // namespace cohort::comm::transport
