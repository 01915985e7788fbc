#include "cohort/comm/transport/tcp/tcp_pair.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cohort/comm/reduce.h"
#include "cohort/comm/transport/tcp/frame.h"

namespace cohort::comm::transport {
namespace {

using tcp::kFrameHeaderBytes;
constexpr size_t kStagingBytes = size_t{256} << 10;
// The length of a data frame is compared with the posted recv (a Mismatch), not limited here.
constexpr tcp::FrameLimits kRecvLimits{};

}  // namespace

TcpPair::TcpPair(int rank, int peer, net::Fd fd, Notifier* notifier)
    : Pair(peer), rank_(rank), fd_(std::move(fd)), notifier_(notifier) {}

TcpPair::~TcpPair() = default;

std::exception_ptr TcpPair::socket_error(const char* during, int err) {
  return std::make_exception_ptr(IoError(
      detail::str("tcp transport: connection to rank ", peer(), " (", net::peer_address(fd_.get()),
                  ") failed during ", during, ": ", std::strerror(err), "; rank ", peer(),
                  " may have died (check its log)")));
}

std::exception_ptr TcpPair::peer_closed(const OpState* op) {
  return std::make_exception_ptr(
      IoError(detail::str("tcp transport: rank ", peer(), " closed its connection to rank ", rank_,
                          op ? detail::str(" during ", op->describe(), " (", op->done_bytes, " of ",
                                           op->bytes, " bytes transferred)")
                             : std::string(),
                          "; check rank ", peer(), "'s log for its error")));
}

void TcpPair::post(const std::shared_ptr<OpState>& op) {
  bool finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    op->peer = peer();
    op->seq = op->kind == OpKind::kSend ? send_seq_++ : recv_seq_++;
    if (broken_) return fail(*op, broken_);
    if (closed_) {
      return fail(*op, std::make_exception_ptr(
                           IoError(detail::str("tcp transport: ", op->describe(),
                                               " posted after rank ", rank_, " closed the pair"))));
    }
    (op->kind == OpKind::kSend ? sends_ : recvs_).push_back(op);
    // Edge-triggered epoll will not report bytes that arrived before this recv was posted,
    // so try the socket now (this also sends small messages without a thread hop).
    finished = drive_locked();
  }
  if (finished) notifier_->notify();
}

void TcpPair::on_event(uint32_t events) {
  bool finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || broken_) return;
    finished = drive_locked();
    if ((events & (EPOLLERR | EPOLLHUP)) && !broken_ && (!sends_.empty() || !recvs_.empty())) {
      // Nothing more can move; drive_locked() saw no error only if no op could use the socket.
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      fail_all_locked(err ? socket_error("poll", err) : peer_closed(nullptr));
      finished = true;
    }
  }
  if (finished) notifier_->notify();
}

bool TcpPair::drive_locked() {
  bool finished = drive_sends_locked();
  finished |= drive_recvs_locked();
  return finished;
}

bool TcpPair::drive_sends_locked() {
  bool finished = false;
  while (!sends_.empty() && !broken_) {
    OpState& op = *sends_.front();
    if (send_hdr_done_ == 0 && op.done_bytes == 0) {
      tcp::encode_frame_header({tcp::FrameKind::kData, op.bytes, op.header}, send_hdr_);
    }
    iovec iov[2];
    int n = 0;
    if (send_hdr_done_ < kFrameHeaderBytes) {
      iov[n++] = {send_hdr_ + send_hdr_done_, kFrameHeaderBytes - send_hdr_done_};
    }
    if (op.done_bytes < op.bytes) iov[n++] = {op.data + op.done_bytes, op.bytes - op.done_bytes};
    ssize_t w = 0;
    if (n > 0) {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = size_t(n);
      w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        fail_all_locked(socket_error(op.describe().c_str(), errno));
        return true;
      }
    }
    size_t hdr = std::min(size_t(w), kFrameHeaderBytes - send_hdr_done_);
    send_hdr_done_ += hdr;
    op.done_bytes += size_t(w) - hdr;
    if (send_hdr_done_ == kFrameHeaderBytes && op.done_bytes == op.bytes) {
      finish(op);
      sends_.pop_front();
      send_hdr_done_ = 0;
      finished = true;
    }
  }
  return finished;
}

bool TcpPair::drive_recvs_locked() {
  bool finished = false;
  while (!recvs_.empty() && !broken_) {
    OpState& op = *recvs_.front();
    if (!op.header_done && !read_header_locked(op)) break;
    if (broken_) return true;
    if (op.done_bytes < op.bytes && !read_payload_locked(op)) break;
    if (broken_) return true;
    if (op.done_bytes == op.bytes) {
      finish(op);
      recvs_.pop_front();
      finished = true;
    }
  }
  return finished;
}

// Reads the rest of the frame header; false if the socket has no more bytes for now.
bool TcpPair::read_header_locked(OpState& op) {
  while (recv_hdr_done_ < kFrameHeaderBytes) {
    ssize_t r = ::recv(fd_.get(), recv_hdr_ + recv_hdr_done_, kFrameHeaderBytes - recv_hdr_done_,
                       MSG_DONTWAIT);
    if (r > 0) {
      recv_hdr_done_ += size_t(r);
      continue;
    }
    if (r == 0) {
      fail_all_locked(peer_closed(&op));
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    fail_all_locked(socket_error(op.describe().c_str(), errno));
    return true;
  }
  recv_hdr_done_ = 0;
  tcp::FrameDecode d = tcp::decode_frame_header(recv_hdr_, kRecvLimits);
  if (!d.ok()) {
    fail_all_locked(std::make_exception_ptr(IoError(detail::str(
        "tcp transport: ", op.describe(), ": ", d.error, " from ", net::peer_address(fd_.get()),
        "; the stream from rank ", peer(), " is corrupt or not a cohort peer"))));
    return true;
  }
  if (d.frame.kind == tcp::FrameKind::kAbort) {
    fail_all_locked(std::make_exception_ptr(IoError(
        detail::str("tcp transport: rank ", peer(), " aborted its connection to rank ", rank_,
                    " during ", op.describe(), ": ", read_reason_locked(d.frame.length)))));
    return true;
  }
  uint64_t bytes = d.frame.length;
  const Header& header = d.frame.header;
  if (bytes != op.bytes || !(header == op.header)) {
    fail_all_locked(std::make_exception_ptr(
        Mismatch(detail::str("tcp transport: ", op.describe(), " expected ", op.bytes,
                             " bytes with tag ", op.header.tag, ", rank ", peer(), " sent ", bytes,
                             " bytes with tag ", header.tag),
                 peer(), op.header, op.bytes, header, bytes)));
    return true;
  }
  op.header_done = true;
  return true;
}

// Reads payload bytes (folding them in for reducing recvs); false once the socket is dry.
bool TcpPair::read_payload_locked(OpState& op) {
  size_t esz = op.reduce ? dtype_size(op.reduce_spec.dtype) : 1;
  if (op.reduce && staging_.empty()) staging_.resize(kStagingBytes);
  while (op.done_bytes < op.bytes) {
    size_t want = op.bytes - op.done_bytes - staged_;
    char* dst = op.data + op.done_bytes;
    if (op.reduce) {
      want = std::min(want, staging_.size() - staged_);
      dst = staging_.data() + staged_;
    }
    ssize_t r = ::recv(fd_.get(), dst, want, MSG_DONTWAIT);
    if (r == 0) {
      fail_all_locked(peer_closed(&op));
      return true;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      fail_all_locked(socket_error(op.describe().c_str(), errno));
      return true;
    }
    if (!op.reduce) {
      op.done_bytes += size_t(r);
      continue;
    }
    staged_ += size_t(r);
    size_t whole = staged_ - staged_ % esz;
    char* acc = op.data + op.done_bytes;
    reduce(op.reduce_spec.dtype, op.reduce_spec.op, acc, staging_.data(), acc, whole / esz);
    op.done_bytes += whole;
    staged_ -= whole;
    std::memmove(staging_.data(), staging_.data() + whole, staged_);
  }
  return true;
}

// The peer's abort frame arrives in one piece (one sendmsg just before shutdown); take what is
// there without waiting.
std::string TcpPair::read_reason_locked(size_t bytes) {
  std::string reason(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t r = ::recv(fd_.get(), reason.data() + got, bytes - got, MSG_DONTWAIT);
    if (r <= 0) break;
    got += size_t(r);
  }
  reason.resize(got);
  return reason.empty() ? "(no reason received)" : reason;
}

// Best effort: tell the peer why before the connection goes down, unless a frame is half sent
// (then the peer only sees the connection close).
void TcpPair::send_abort_locked(const std::string& reason) {
  bool mid_frame = send_hdr_done_ != 0 || (!sends_.empty() && sends_.front()->done_bytes != 0);
  if (mid_frame || closed_ || broken_) return;
  uint64_t bytes = std::min<uint64_t>(reason.size(), tcp::kMaxAbortBytes);
  unsigned char hdr[kFrameHeaderBytes];
  tcp::encode_frame_header({tcp::FrameKind::kAbort, bytes, Header{}}, hdr);
  iovec iov[2] = {{hdr, kFrameHeaderBytes}, {const_cast<char*>(reason.data()), size_t(bytes)}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  (void)::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void TcpPair::fail_all_locked(std::exception_ptr why) {
  send_abort_locked(what_of(why));
  if (!broken_) broken_ = why;
  for (auto& op : sends_) fail(*op, why);
  for (auto& op : recvs_) fail(*op, why);
  sends_.clear();
  recvs_.clear();
  // The peer learns at once (EOF) instead of running into its deadline.
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void TcpPair::abort(std::exception_ptr why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all_locked(std::move(why));
  }
  notifier_->notify();
}

void TcpPair::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  if (!sends_.empty() || !recvs_.empty()) {
    fail_all_locked(std::make_exception_ptr(
        IoError(detail::str("tcp transport: rank ", rank_, " closed its pair with rank ", peer(),
                            " with operations pending"))));
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace cohort::comm::transport
