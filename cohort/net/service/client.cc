#include "cohort/net/service/client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"
#include "cohort/net/auth.h"

namespace cohort::net::service {
namespace {

constexpr size_t kReadChunk = size_t{256} << 10;
// The handshake gets its own bound: a server that accepted but is wedged must not hold us for
// the whole connect retry window.
constexpr Millis kAuthTimeout = std::chrono::seconds(30);

double secs(Millis m) {
  return m.count() / 1000.0;
}

}  // namespace

Client::Client(ClientOptions options) : options_(std::move(options)) {
  net::check_secret(options_.secret, options_.secret_policy, options_.name + " client");
  COHORT_CHECK_ARG(options_.port != 0, options_.name, " client: no port given for ", options_.host);
  COHORT_CHECK_ARG(
      options_.max_payload_bytes > 0 && options_.max_payload_bytes <= (size_t{1} << 31),
      options_.name, " client: max_payload_bytes must be in 1..2^31");
  address_ = net::join_host_port(options_.host, options_.port);
  const std::string what = describe();
  auto deadline = net::deadline_after(options_.connect_timeout);
  fd_ = net::connect_tcp(options_.host, options_.port, deadline, what);
  handshake(std::min(deadline, net::deadline_after(kAuthTimeout)));
  wake_fd_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  COHORT_CHECK_IO(wake_fd_.valid(), what, ": eventfd failed: ", std::strerror(errno));
  reader_ = std::thread([this] { read_loop(); });
}

void Client::handshake(net::Deadline deadline) {
  const std::string what = describe();
  if (!options_.tls.enabled()) {
    net::auth::answer_challenge(fd_.get(), options_.secret, kContext, deadline, what);
    return;
  }
  tls_ctx_ = std::make_unique<net::TlsContext>(options_.tls, net::TlsRole::kClient);
  net::set_nonblocking(fd_.get());
  tls_ = std::make_unique<net::TlsStream>(*tls_ctx_, fd_.get(), options_.host);
  tls_->handshake(deadline, what);
  // The secret's handshake (auth.h), inside TLS.
  net::auth::ClientHandshake hs(options_.secret, kContext);
  std::array<uint8_t, net::auth::kChallengeBytes> challenge{};
  tls_->read_exact(challenge.data(), challenge.size(), deadline, what);
  const auto response = hs.respond(challenge, what);
  tls_->write_all(response.data(), response.size(), deadline, what);
  std::array<uint8_t, net::auth::kResultBytes> result{};
  tls_->read_exact(result.data(), result.size(), deadline, what);
  hs.check_result(result, what);
}

void Client::write_tls(std::span<const uint8_t> head, std::span<const uint8_t> payload,
                       net::Deadline deadline, const char* what) {
  for (std::span<const uint8_t> part : {head, payload}) {
    while (!part.empty()) {
      ssize_t r;
      {
        std::lock_guard<std::mutex> t(tls_mu_);
        r = tls_->write(part.data(), part.size());
      }
      if (r > 0) {
        part = part.subspan(size_t(r));
        continue;
      }
      COHORT_CHECK_IO(r < 0 && errno == EAGAIN, "sending ", what, " to ", describe(), ": ",
                      r == 0 ? std::string("the connection closed") : tls_->error());
      COHORT_CHECK_T(std::chrono::steady_clock::now() < deadline, Timeout, "timed out sending ",
                     what, " to ", describe());
      // The reader thread may be the one to make progress (TLS wants input): wait briefly.
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 1);
    }
  }
}

Client::~Client() {
  close();
}

void Client::close() {
  std::call_once(close_once_, [this] {
    fail(describe() + ": the client was closed");
    if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
    if (reader_.joinable()) reader_.join();
    std::lock_guard<std::mutex> w(write_mu_);  // no writer holds the fd past this point
    fd_.reset();
  });
}

bool Client::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.empty();
}

void Client::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) return;
    failure_ = why;
  }
  cv_.notify_all();
}

void Client::check_size(std::span<const uint8_t> payload, const char* what) const {
  COHORT_CHECK_ARG(payload.size() <= options_.max_payload_bytes, describe(), ": ", what, " of ",
                   payload.size(), " bytes exceeds max_payload_bytes (", options_.max_payload_bytes,
                   ")");
}

void Client::write_frame(Kind kind, uint64_t id, std::span<const uint8_t> payload, Millis timeout) {
  uint8_t head[kFrameHeadBytes];
  encode_head(kind, id, payload.size(), head);
  std::lock_guard<std::mutex> w(write_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw IoError(failure_);
  }
  try {
    const auto deadline = net::deadline_after(timeout);
    if (tls_)
      write_tls(head, payload, deadline, kind_name(kind));
    else
      net::write_all_parts(fd_.get(), head, payload, deadline, describe(), kind_name(kind));
  } catch (const Error& e) {
    // Part of a frame may be on the wire: the stream cannot be used any more.
    fail(detail::str(describe(), ": sending a ", kind_name(kind), " failed: ", e.what()));
    ::shutdown(fd_.get(), SHUT_RDWR);
    throw;
  }
}

Bytes Client::request(std::span<const uint8_t> payload) {
  return request(payload, options_.timeout);
}

Bytes Client::request(std::span<const uint8_t> payload, Millis timeout) {
  check_size(payload, "request");
  const auto deadline = net::deadline_after(timeout);
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw IoError(failure_);
    id = next_id_++;
    pending_[id];
  }
  try {
    write_frame(Kind::kRequest, id, payload, timeout);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(id);
    throw;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return pending_[id].done || !failure_.empty(); });
  Pending p = std::move(pending_[id]);
  pending_.erase(id);
  if (p.done && p.error)
    throw InvalidArgument(detail::str(describe(), " refused request ", id, ": ",
                                      std::string(p.payload.begin(), p.payload.end())));
  if (p.done) return std::move(p.payload);
  if (!failure_.empty())
    throw IoError(detail::str(failure_, " (request ", id, " got no response)"));
  throw Timeout(detail::str(describe(), ": no response to request ", id, " within ", secs(timeout),
                            " s (is the server overloaded, or is its handler "
                            "holding the answer back?)"));
}

void Client::send(std::span<const uint8_t> payload) {
  check_size(payload, "message");
  write_frame(Kind::kMessage, 0, payload, options_.timeout);
}

std::optional<Bytes> Client::receive(Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !inbox_.empty() || !failure_.empty(); });
  if (!inbox_.empty()) {
    Bytes m = std::move(inbox_.front());
    inbox_.pop_front();
    inbox_bytes_ -= m.size();
    return m;
  }
  if (!failure_.empty()) throw IoError(failure_);
  return std::nullopt;
}

bool Client::deliver(Kind kind, uint64_t id, Bytes payload) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (kind == Kind::kMessage) {
      if (inbox_bytes_ + payload.size() > options_.max_inbox_bytes) return false;
      inbox_bytes_ += payload.size();
      inbox_.push_back(std::move(payload));
    } else {
      auto it = pending_.find(id);
      if (it == pending_.end()) return true;  // its caller gave up (timeout): discard
      it->second.done = true;
      it->second.error = kind == Kind::kError;
      it->second.payload = std::move(payload);
    }
  }
  cv_.notify_all();
  return true;
}

// The reader thread: cuts what arrives into frames and hands each to its waiter, until the
// connection ends or close() wakes it. A large frame's body is received straight into the
// buffer its waiter is given (no copy out of the read buffer).
void Client::read_loop() {
  // buf[pos, end) is read but not parsed yet. buf only grows: resizing it for every read would
  // zero-fill a whole chunk each time (megabytes per parameter-server pull).
  Bytes buf;
  size_t pos = 0, end = 0;
  Bytes body;  // the large body being received, body_have bytes of it so far
  size_t body_have = 0;
  Kind body_kind = Kind::kMessage;
  uint64_t body_id = 0;
  bool in_body = false;
  for (;;) {
    if (in_body) {
      if (body_have < body.size()) {
        if (!read_some(body.data() + body_have, body.size() - body_have, &body_have)) return;
        continue;
      }
      in_body = false;
      if (!deliver(body_kind, body_id, std::move(body))) return inbox_overflow();
      body = Bytes();
    }
    while (pos < end) {
      Frame f;
      auto res = parse_frame({buf.data() + pos, end - pos}, options_.max_payload_bytes, &f);
      if (res.status == ParseStatus::kNeedMore) {
        if (res.size >= kFrameHeadBytes + kDirectBytes && end - pos >= kFrameHeadBytes) {
          body_kind = Kind(buf[pos + 4]);
          body_id = bytes::load<uint64_t>(buf.data() + pos + kHeaderBytes);
          if (body_kind == Kind::kRequest || (body_kind == Kind::kMessage && body_id != 0))
            return malformed(body_kind == Kind::kRequest ? "a request, to a client"
                                                         : "a message with an id");
          body.resize(res.size - kFrameHeadBytes);
          body_have = end - pos - kFrameHeadBytes;
          std::copy_n(buf.data() + pos + kFrameHeadBytes, body_have, body.data());
          pos = end;
          in_body = true;
        }
        break;
      }
      if (res.status == ParseStatus::kMalformed || f.kind == Kind::kRequest)
        return malformed(res.error.empty() ? "a request, to a client" : res.error);
      if (!deliver(f.kind, f.id, Bytes(f.payload.begin(), f.payload.end())))
        return inbox_overflow();
      pos += res.size;
    }
    if (pos == end) {
      pos = end = 0;
    } else if (pos > kReadChunk) {
      std::memmove(buf.data(), buf.data() + pos, end - pos);
      end -= pos;
      pos = 0;
    }
    if (in_body) continue;
    if (buf.size() - end < kReadChunk) buf.resize(std::max(2 * buf.size(), end + kReadChunk));
    if (!read_some(buf.data() + end, buf.size() - end, &end)) return;
  }
}

void Client::malformed(const std::string& why) {
  fail(detail::str(describe(), " sent a malformed frame: ", why));
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void Client::inbox_overflow() {
  fail(detail::str(describe(), " pushed more than ", options_.max_inbox_bytes,
                   " bytes of messages that were not received (ClientOptions::"
                   "max_inbox_bytes); the connection is dropped"));
  ::shutdown(fd_.get(), SHUT_RDWR);
}

bool Client::read_some(uint8_t* dst, size_t room, size_t* have) {
  bool pending = false;
  if (tls_) {
    std::lock_guard<std::mutex> t(tls_mu_);
    pending = tls_->pending() > 0;  // decrypted already: the socket may have nothing
  }
  pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
  // No deadline: close() ends this wait, and callers have theirs.
  int rc = ::poll(fds, 2, pending ? 0 : -1);
  if (rc < 0) {
    if (errno == EINTR) return true;
    fail(detail::str(describe(), ": poll failed: ", std::strerror(errno)));
    return false;
  }
  if (fds[1].revents) return false;  // close()
  ssize_t r;
  if (tls_) {
    std::lock_guard<std::mutex> t(tls_mu_);
    r = tls_->read(dst, room);
    if (r < 0 && errno == EPROTO) {
      fail(detail::str(describe(), ": TLS failed: ", tls_->error()));
      return false;
    }
  } else {
    r = ::recv(fd_.get(), dst, room, MSG_DONTWAIT);
  }
  if (r > 0) *have += size_t(r);
  if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) return true;
  fail(r == 0 ? detail::str(describe(),
                            " closed the connection (the server stopped, or it dropped this "
                            "client: its log says why)")
              : detail::str(describe(), ": reading failed: ", std::strerror(errno)));
  return false;
}

}  // namespace cohort::net::service
