#include "cohort/net/service/server.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"
#include "cohort/core/logging.h"

namespace cohort::net::service {

using net::Refusal;
using net::ServerConn;
using net::ServerLoop;

class Server::Impl : public ServerLoop::Handler {
 public:
  Impl(ServerOptions options, Handlers handlers);
  // Any thread: queues a frame for a peer (on the loop thread, soon).
  void queue(uint64_t peer, Kind kind, uint64_t id, Bytes payload);

  ServerOptions options_;
  Handlers handlers_;
  ServerLoop loop_;

 private:
  void on_ready(ServerConn& c) override;
  void on_data(ServerConn& c) override;
  void on_close(ServerConn& c, const std::string& why) override;
  void start_body(ServerConn& c, size_t total);
  void dispatch(ServerConn& c, Kind kind, uint64_t id, Bytes payload);
  void answer_request(ServerConn& c, uint64_t id, Bytes payload);
  void enqueue(ServerConn& c, Kind kind, uint64_t id, std::span<const uint8_t> payload);
  void send_direct(ServerConn& c, Kind kind, uint64_t id, std::span<const uint8_t> payload);
  static Peer peer_of(const ServerConn& c) { return Peer{c.id, c.peer, c.cert_name}; }
};

namespace {

// Answers at least this large are written straight from the handler's buffer when nothing is
// queued before them (send_direct); smaller ones are copied into the queue.
constexpr size_t kDirectSendBytes = size_t{64} << 10;

net::ServerLoopOptions loop_options(const ServerOptions& o) {
  COHORT_CHECK_ARG(o.max_payload_bytes > 0 && o.max_payload_bytes <= (size_t{1} << 31),
                   "service server: max_payload_bytes (", o.max_payload_bytes,
                   ") must be in 1..2^31");
  net::ServerLoopOptions l;
  l.host = o.host;
  l.port = o.port;
  l.secret = o.secret;
  l.secret_policy = o.secret_policy;
  l.auth_timeout = o.auth_timeout;
  l.auth_context = std::string(kContext);
  l.owner = o.name + " server";
  l.log_subsystem = o.name;
  l.name = o.name + " server";
  // The loop parses everything it reads: beyond one unfinished frame and a read or two of the
  // next, a peer is sending while not being read (its answers pile up unsent).
  l.max_unparsed = kHeaderBytes + kIdBytes + o.max_payload_bytes + (size_t{1} << 20);
  l.frame_timeout = o.frame_timeout;
  l.tls = o.tls;
  COHORT_CHECK_ARG(o.frame_timeout.count() > 0, l.owner, ": frame_timeout must be > 0");
  return l;
}

}  // namespace

Server::Impl::Impl(ServerOptions options, Handlers handlers)
    : options_(std::move(options)),
      handlers_(std::move(handlers)),
      loop_(loop_options(options_), this) {
  loop_.start();
  log::debug(options_.name, options_.name, " server listening on ", loop_.address());
}

void Server::Impl::on_ready(ServerConn& c) {
  log::debug(options_.name, "peer ", c.id, " (", c.peer, ") joined");
  if (handlers_.on_join) handlers_.on_join(peer_of(c));
}

void Server::Impl::on_close(ServerConn& c, const std::string& why) {
  log::debug(options_.name, "peer ", c.id, " (", c.peer, ") left", why.empty() ? "" : ": ", why);
  if (handlers_.on_leave) handlers_.on_leave(peer_of(c), why);
}

void Server::Impl::on_data(ServerConn& c) {
  const size_t pause_at = loop_.options().max_unsent;
  while (c.state == ServerConn::State::kReady && !c.dead && c.unsent() < pause_at) {
    if (c.body_active) {  // a large body received into its own buffer
      if (!c.body_full()) return;
      const Kind kind = Kind(c.body_kind);
      const uint64_t id = c.body_tag;
      dispatch(c, kind, id, c.take_body());
      continue;
    }
    if (c.unparsed() == 0) return;
    Frame f;
    auto res = parse_frame({c.in.data() + c.in_pos, c.unparsed()}, options_.max_payload_bytes, &f);
    if (res.status == ParseStatus::kNeedMore) return start_body(c, res.size);
    if (res.status == ParseStatus::kMalformed)
      return loop_.refuse(c, Refusal::kBadFrame, res.error);
    c.in_pos += res.size;  // f.payload still points into c.in: copied out first
    dispatch(c, f.kind, f.id, Bytes(f.payload.begin(), f.payload.end()));
  }
}

// An unfinished frame of `total` bytes (0: its header is not in yet) is buffered. A large one
// whose header and id are in has its body received straight into the payload the handler
// will be given (ServerConn::start_body), rather than into the read buffer and copied out.
void Server::Impl::start_body(ServerConn& c, size_t total) {
  if (total < kFrameHeadBytes + kDirectBytes || c.unparsed() < kFrameHeadBytes) return;
  const uint8_t* head = c.in.data() + c.in_pos;
  const Kind kind = Kind(head[4]);  // parse_frame checked the magic, kind and length
  const uint64_t id = bytes::load<uint64_t>(head + kHeaderBytes);
  if (kind == Kind::kMessage && id != 0)
    return loop_.refuse(c, Refusal::kBadFrame,
                        detail::str("message with id ", id, " (messages carry id 0)"));
  c.in_pos += kFrameHeadBytes;
  c.start_body(total - kFrameHeadBytes, c.unparsed(), uint8_t(kind), id);
}

void Server::Impl::dispatch(ServerConn& c, Kind kind, uint64_t id, Bytes payload) {
  switch (kind) {
    case Kind::kRequest:
      return answer_request(c, id, std::move(payload));
    case Kind::kMessage:
      if (handlers_.on_message) handlers_.on_message(peer_of(c), std::move(payload));
      return;
    case Kind::kResponse:
    case Kind::kError:
      return loop_.refuse(c, Refusal::kBadFrame,
                          detail::str("a client sent a ", kind_name(kind), " frame"));
  }
}

void Server::Impl::answer_request(ServerConn& c, uint64_t id, Bytes payload) {
  std::optional<Bytes> answer;
  std::string error;
  try {
    if (!handlers_.on_request) throw InvalidArgument(options_.name + " takes no requests");
    answer = handlers_.on_request(peer_of(c), id, std::move(payload));
    if (!answer) return;  // answered later through respond() or fail()
  } catch (const InvalidArgument& e) {
    error = e.what();
  } catch (const std::exception& e) {
    log::error(options_.name, "request ", id, " from ", c.peer, " failed: ", e.what());
    error = e.what();
  }
  if (error.empty() && answer->size() > options_.max_payload_bytes) {
    error = detail::str("the answer of ", answer->size(), " bytes exceeds max_payload_bytes (",
                        options_.max_payload_bytes, ")");
  }
  if (error.empty()) return enqueue(c, Kind::kResponse, id, *answer);
  error.resize(std::min(error.size(), kMaxErrorBytes));
  enqueue(c, Kind::kError, id, {reinterpret_cast<const uint8_t*>(error.data()), error.size()});
}

void Server::Impl::enqueue(ServerConn& c, Kind kind, uint64_t id,
                           std::span<const uint8_t> payload) {
  if (c.unsent() + payload.size() > options_.max_queued_bytes) {
    return loop_.drop(
        c, detail::str("it does not read what is sent to it (", c.unsent(),
                       " bytes queued; max_queued_bytes ", options_.max_queued_bytes, ")"));
  }
  // Straight from the payload on plain TCP; TLS encrypts through its own buffer anyway.
  if (c.unsent() == 0 && payload.size() >= kDirectSendBytes && !c.tls)
    return send_direct(c, kind, id, payload);
  encode_frame(kind, id, payload, &c.out);
  loop_.flush(c);
}

// Nothing is queued before this frame: send it straight from the payload (one sendmsg over the
// header and the payload) and queue only what the socket did not take, instead of copying
// megabytes into the queue first.
void Server::Impl::send_direct(ServerConn& c, Kind kind, uint64_t id,
                               std::span<const uint8_t> payload) {
  uint8_t head[kFrameHeadBytes];
  encode_head(kind, id, payload.size(), head);
  iovec iov[2] = {{head, kFrameHeadBytes}, {const_cast<uint8_t*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t r;
  do {
    r = ::sendmsg(c.fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    return loop_.close(c, detail::str("send failed: ", std::strerror(errno)));
  size_t sent = r < 0 ? 0 : size_t(r);
  if (sent < kFrameHeadBytes) {
    c.out.insert(c.out.end(), head + sent, head + kFrameHeadBytes);
    sent = kFrameHeadBytes;
  }
  c.out.insert(c.out.end(), payload.begin() + ptrdiff_t(sent - kFrameHeadBytes), payload.end());
}

void Server::Impl::queue(uint64_t peer, Kind kind, uint64_t id, Bytes payload) {
  COHORT_CHECK_ARG(payload.size() <= options_.max_payload_bytes, options_.name,
                   " server: ", kind_name(kind), " of ", payload.size(),
                   " bytes exceeds max_payload_bytes (", options_.max_payload_bytes, ")");
  loop_.post([this, peer, kind, id, payload = std::move(payload)] {
    ServerConn* c = loop_.find(peer);
    if (!c || c->state != ServerConn::State::kReady) {
      log::debug(options_.name, kind_name(kind), " to peer ", peer, " dropped: it has left");
      return;
    }
    enqueue(*c, kind, id, payload);
    if (!c->dead) loop_.serve(*c);  // frames held back for want of room may go on now
  });
}

Server::Server(ServerOptions options, Handlers handlers)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handlers))) {}

Server::~Server() {
  stop();
}

void Server::stop() {
  impl_->loop_.stop();
}

void Server::send(uint64_t peer, Bytes payload) {
  impl_->queue(peer, Kind::kMessage, 0, std::move(payload));
}

void Server::respond(uint64_t peer, uint64_t request_id, Bytes payload) {
  impl_->queue(peer, Kind::kResponse, request_id, std::move(payload));
}

void Server::fail(uint64_t peer, uint64_t request_id, const std::string& message) {
  Bytes text(message.begin(), message.begin() + std::min(message.size(), kMaxErrorBytes));
  impl_->queue(peer, Kind::kError, request_id, std::move(text));
}

const std::string& Server::host() const {
  return impl_->loop_.host();
}
uint16_t Server::port() const {
  return impl_->loop_.port();
}
const std::string& Server::address() const {
  return impl_->loop_.address();
}
net::ServerStats Server::stats() const {
  return impl_->loop_.stats();
}

}  // namespace cohort::net::service
