#include "cohort/net/server_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"

namespace cohort::net {
namespace {

constexpr size_t kReadChunk = size_t{256} << 10;
constexpr auto kCloseGrace = std::chrono::seconds(1);

double secs(Millis m) {
  return m.count() / 1000.0;
}

// The reason as the log line gives it, before any detail.
const char* refusal_text(Refusal r) {
  switch (r) {
    case Refusal::kNotHandshake:
      return "not a cohort handshake (random bytes, a wrong port, or not a cohort client?)";
    case Refusal::kBadHmac:
      return "bad HMAC (wrong job secret?)";
    case Refusal::kAuthTimeout:
      return "handshake timeout";
    case Refusal::kHungUp:
      return "hung up before authenticating";
    case Refusal::kBadFrame:
      return "malformed frame after authenticating";
    case Refusal::kFrameTimeout:
      return "stalled in the middle of a frame";
    case Refusal::kTlsHandshake:
      return "TLS handshake failed (no certificate, one from another CA, or not TLS)";
  }
  return "?";
}

}  // namespace

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kNotHandshake:
      return "not a cohort handshake";
    case Refusal::kBadHmac:
      return "bad HMAC";
    case Refusal::kAuthTimeout:
      return "auth timeout";
    case Refusal::kHungUp:
      return "hung up";
    case Refusal::kBadFrame:
      return "bad frame";
    case Refusal::kFrameTimeout:
      return "frame timeout";
    case Refusal::kTlsHandshake:
      return "TLS handshake failed";
  }
  return "?";
}

void ServerConn::start_body(size_t size, size_t n, uint8_t kind, uint64_t tag) {
  body.resize(size);  // zero-fills once: cheaper than copying the body out of `in`
  std::copy_n(in.data() + in_pos, n, body.data());
  in_pos += n;
  body_have = n;
  body_active = true;
  body_kind = kind;
  body_tag = tag;
}

Bytes ServerConn::take_body() {
  body_active = false;
  body_have = 0;
  return std::move(body);
}

uint64_t ServerStats::refused_total() const {
  uint64_t n = 0;
  for (uint64_t r : refused) n += r;
  return n;
}

ServerLoop::ServerLoop(ServerLoopOptions options, Handler* handler)
    : options_(std::move(options)), handler_(handler) {
  const std::string& owner = options_.owner;
  check_secret(options_.secret, options_.secret_policy, owner);
  COHORT_CHECK_ARG(!options_.secret.empty() || is_loopback_host(options_.host), owner,
                   ": refusing to serve ", options_.host,
                   " without a job secret; insecure mode is for loopback only");
  COHORT_CHECK_ARG(options_.auth_timeout.count() > 0, owner, ": auth_timeout must be > 0");
  COHORT_CHECK_ARG(options_.frame_timeout.count() >= 0, owner, ": frame_timeout must be >= 0");
  listener_ = listen_tcp(options_.host, options_.port, options_.backlog);
  address_ = join_host_port(listener_.host, listener_.port);
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  COHORT_CHECK_IO(wake_fd_.valid(), owner, ": eventfd failed: ", std::strerror(errno));
  if (options_.tls.enabled())
    tls_ctx_ = std::make_unique<TlsContext>(options_.tls, TlsRole::kServer);
}

ServerLoop::~ServerLoop() {
  stop();
}

void ServerLoop::start() {
  thread_ = std::thread([this] { run(); });
  log::debug(options_.log_subsystem, options_.name, " listening on ", address_);
}

void ServerLoop::stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  log_refusal_totals();
}

void ServerLoop::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
}

// One line at shutdown with every refusal, including the ones the rate limit held back.
void ServerLoop::log_refusal_totals() const {
  const ServerStats s = stats();
  if (s.refused_total() == 0) return;
  std::string by_reason;
  for (size_t i = 0; i < kRefusalKinds; ++i) {
    if (s.refused[i] == 0) continue;
    by_reason +=
        detail::str(by_reason.empty() ? "" : ", ", s.refused[i], " ", refusal_name(Refusal(i)));
  }
  const uint64_t n = s.refused_total();
  log::info(options_.log_subsystem, options_.name, " ", address_, ": refused ", n,
            n == 1 ? " peer" : " peers", " in all (", by_reason, ")");
}

ServerStats ServerLoop::stats() const {
  ServerStats s;
  s.accepted = stats_.accepted.load();
  s.authenticated = stats_.authenticated.load();
  s.auth_failures = stats_.auth_failures.load();
  s.dropped = stats_.dropped.load();
  s.open = stats_.open.load();
  for (size_t i = 0; i < kRefusalKinds; ++i) s.refused[i] = stats_.refused[i].load();
  return s;
}

void ServerLoop::run() {
  while (!stop_.load()) {
    try {
      poll_once();
    } catch (const std::exception& e) {
      // Only poll() itself failing gets here (per-connection errors drop that connection).
      // No exit() in a library: log, back off, and keep serving.
      log::error(options_.log_subsystem, options_.name, " ", address_,
                 ": event loop error: ", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  conns_.clear();
  stats_.open.store(0);
}

int ServerLoop::next_timeout_ms() const {
  Clock::time_point next = handler_->next_timer();
  for (const auto& [id, c] : conns_) {
    if (c->state != ServerConn::State::kReady) next = std::min(next, c->deadline);
    if (c->partial_since != Clock::time_point{})
      next = std::min(next, c->partial_since + options_.frame_timeout);
  }
  if (accept_paused_until_ > Clock::now()) next = std::min(next, accept_paused_until_);
  return next == Clock::time_point::max() ? -1 : poll_timeout_ms(next);
}

void ServerLoop::run_posted() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t r = ::read(wake_fd_.get(), &count, sizeof(count));
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    fns.swap(posted_);
  }
  for (auto& fn : fns) {
    try {
      fn();
    } catch (const std::exception& e) {
      log::error(options_.log_subsystem, options_.name, " ", address_,
                 ": posted task failed: ", e.what());
    }
  }
}

void ServerLoop::poll_once() {
  std::vector<pollfd> fds;
  std::vector<ServerConn*> owners;  // owners[i] for fds[i]; null for the wake and listen fds
  fds.push_back({wake_fd_.get(), POLLIN, 0});
  owners.push_back(nullptr);
  bool accepting = accept_paused_until_ <= Clock::now();
  if (accepting) {
    fds.push_back({listener_.fd.get(), POLLIN, 0});
    owners.push_back(nullptr);
  }
  for (auto& [id, c] : conns_) {
    short ev = 0;
    if (c->state != ServerConn::State::kClosing && c->unsent() < options_.max_unsent) ev |= POLLIN;
    if (c->unsent() > 0 && !(c->tls && c->tls->wants_read())) ev |= POLLOUT;
    fds.push_back({c->fd.get(), ev, 0});
    owners.push_back(c.get());
  }
  // Decrypted bytes waiting inside TLS leave nothing on the socket for poll() to see.
  bool tls_pending = false;
  for (auto& [id, c] : conns_) tls_pending = tls_pending || (c->tls && c->tls->pending() > 0);
  int rc = ::poll(fds.data(), fds.size(), tls_pending ? 0 : next_timeout_ms());
  if (rc < 0 && errno != EINTR) throw IoError(detail::str("poll: ", std::strerror(errno)));
  if (stop_.load()) return;
  for (size_t i = 0; i < fds.size(); ++i)
    if (owners[i] && owners[i]->tls && owners[i]->tls->pending() > 0) fds[i].revents |= POLLIN;
  if (rc > 0 || tls_pending) {
    if (fds[0].revents & POLLIN) run_posted();
    if (accepting && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; i < fds.size(); ++i) {
      ServerConn* c = owners[i];
      if (!c || !fds[i].revents || c->dead) continue;
      try {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(*c);
        // TLS: a read may have moved the handshake on, so queued bytes can go now.
        const bool tls_moved = c->tls && (fds[i].revents & POLLIN) && c->unsent() > 0;
        if (!c->dead && ((fds[i].revents & POLLOUT) || tls_moved)) flush(*c);
        if (!c->dead) serve(*c);
      } catch (const std::exception& e) {
        drop(*c, detail::str("internal error: ", e.what()));
      }
    }
  }
  handler_->after_events();
  expire(Clock::now());
  reap();
}

void ServerLoop::serve(ServerConn& c) {
  if (c.state != ServerConn::State::kReady) return;
  const size_t before = c.in_pos, body_before = c.body_have;
  handler_->on_data(c);
  if (c.dead || options_.frame_timeout.count() == 0) return;
  // The frame timer runs while an unfinished frame is buffered (or its body is being received),
  // from its first byte (or from the last frame completed or body bytes received before it);
  // not while the handler holds back because the peer does not read its answers (then the
  // peer is not stalling, it is being waited on).
  if ((c.unparsed() == 0 && !c.body_active) || c.unsent() >= options_.max_unsent) {
    c.partial_since = {};
  } else if (c.partial_since == Clock::time_point{} || c.in_pos != before ||
             c.body_have != body_before) {
    c.partial_since = Clock::now();
  }
}

void ServerLoop::accept_all() {
  for (;;) {
    int fd = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log::warn(options_.log_subsystem, options_.name, " ", address_, ": cannot accept (",
                  std::strerror(errno), "); pausing accepts for 100 ms");
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: all accepted
    }
    auto c = std::make_unique<ServerConn>();
    c->id = next_id_++;
    c->fd = Fd(fd);
    c->peer = peer_address(fd);
    c->deadline = Clock::now() + options_.auth_timeout;
    set_nodelay(fd);
    if (tls_ctx_) c->tls = std::make_unique<TlsStream>(*tls_ctx_, fd);
    c->handshake.emplace(options_.secret, options_.auth_context);
    const auto& ch = c->handshake->challenge();
    c->out.assign(ch.begin(), ch.end());
    stats_.accepted++;
    stats_.open++;
    log::debug(options_.log_subsystem, "accepted ", c->peer);
    ServerConn& ref = *c;
    conns_.emplace(c->id, std::move(c));
    flush(ref);
  }
}

void ServerLoop::on_readable(ServerConn& c) {
  if (c.state == ServerConn::State::kAuth) return read_handshake(c);
  if (c.state == ServerConn::State::kReady) return read_frames(c);
  // kClosing: discard whatever arrives; a hang-up ends it.
  uint8_t sink[512];
  ssize_t r = conn_recv(c, sink, sizeof(sink));
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) close(c);
}

void ServerLoop::read_handshake(ServerConn& c) {
  // Read no more than the response: nothing else is read before the peer is authenticated.
  size_t have = c.in.size();
  c.in.resize(auth::kResponseBytes);
  ssize_t r = conn_recv(c, c.in.data() + have, auth::kResponseBytes - have);
  c.in.resize(have + size_t(std::max<ssize_t>(r, 0)));
  if (r == 0) return refuse(c, Refusal::kHungUp, "");
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    if (c.tls && errno == EPROTO) return refuse(c, Refusal::kTlsHandshake, c.tls->error());
    return refuse(c, Refusal::kHungUp, detail::str("read failed: ", std::strerror(errno)));
  }
  if (!auth::ServerHandshake::plausible_prefix(c.in)) return refuse(c, Refusal::kNotHandshake, "");
  if (c.in.size() < auth::kResponseBytes) return;
  auto verdict = c.handshake->verify(c.in);
  auto result = c.handshake->result();
  c.out.insert(c.out.end(), result.begin(), result.end());
  c.in.clear();
  if (verdict == auth::ServerHandshake::Verdict::kAccepted) {
    c.state = ServerConn::State::kReady;
    c.handshake.reset();
    if (c.tls) c.cert_name = c.tls->peer_name();  // TLS is done: its certificate is verified
    stats_.authenticated++;
    log::debug(options_.log_subsystem, "authenticated ", c.peer);
    handler_->on_ready(c);
  } else {
    // The result tells the peer it was refused; close once it is sent.
    note_refusal(c, Refusal::kBadHmac, "");
    c.state = ServerConn::State::kClosing;
    c.deadline = Clock::now() + kCloseGrace;
  }
  if (!c.dead) flush(c);
}

void ServerLoop::read_frames(ServerConn& c) {
  if (c.body_active && c.body_have < c.body.size()) return read_body(c);
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos > kReadChunk) {
    c.in.erase(c.in.begin(), c.in.begin() + ptrdiff_t(c.in_pos));
    c.in_pos = 0;
  }
  // Read a chunk, or as much as the buffer already has room for (a large frame's body in one
  // call once the buffer has grown to it), short of what max_unparsed allows; no zero-fill.
  const size_t have = c.in.size();
  const size_t room = c.in.capacity() - have;
  const size_t allowed =
      options_.max_unparsed > c.unparsed() ? options_.max_unparsed - c.unparsed() : 0;
  const size_t want = std::max(kReadChunk, std::min(room, allowed));
  c.in.resize(have + want);
  ssize_t r = conn_recv(c, c.in.data() + have, want);
  c.in.resize(have + size_t(std::max<ssize_t>(r, 0)));
  if (r == 0) {
    log::debug(options_.log_subsystem, c.peer, " disconnected");
    return close(c);
  }
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    log::debug(options_.log_subsystem, c.peer, " read failed: ", std::strerror(errno));
    return close(c, detail::str("read failed: ", std::strerror(errno)));
  }
  // A parked client should be silent; one that keeps sending is not a cohort client.
  if (c.unparsed() > options_.max_unparsed)
    refuse(c, Refusal::kBadFrame,
           detail::str("sent ", c.unparsed(), " bytes without waiting for answers"));
}

void ServerLoop::read_body(ServerConn& c) {
  ssize_t r = conn_recv(c, c.body.data() + c.body_have, c.body.size() - c.body_have);
  if (r > 0) c.body_have += size_t(r);
  if (r == 0) {
    log::debug(options_.log_subsystem, c.peer, " disconnected in the middle of a frame");
    return close(c);
  }
  if (r < 0 && errno != EAGAIN && errno != EINTR) {
    log::debug(options_.log_subsystem, c.peer, " read failed: ", std::strerror(errno));
    return close(c, detail::str("read failed: ", std::strerror(errno)));
  }
}

ssize_t ServerLoop::conn_recv(ServerConn& c, void* buf, size_t n) {
  if (c.tls) return c.tls->read(buf, n);
  return ::recv(c.fd.get(), buf, n, MSG_DONTWAIT);
}

ssize_t ServerLoop::conn_send(ServerConn& c, const void* buf, size_t n) {
  if (c.tls) return c.tls->write(buf, n);
  return ::send(c.fd.get(), buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

ServerConn* ServerLoop::find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second->dead ? nullptr : it->second.get();
}

// Every pass either moves bytes, stops (the socket is full, or TLS waits for the peer), or
// ends the connection: a send that moves nothing is a hang-up, never a reason to try again.
void ServerLoop::flush(ServerConn& c) {
  while (c.unsent() > 0) {
    ssize_t r = conn_send(c, c.out.data() + c.out_pos, c.unsent());
    if (r > 0) {
      c.out_pos += size_t(r);
      continue;
    }
    const int err = r < 0 ? errno : EPIPE;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return;
    const bool auth = c.state == ServerConn::State::kAuth;
    if (c.tls && err == EPROTO && auth) return refuse(c, Refusal::kTlsHandshake, c.tls->error());
    const std::string why = c.tls && !c.tls->error().empty()
                                ? c.tls->error()
                                : detail::str("send failed: ", std::strerror(err));
    // Before authenticating, a peer that went away is counted as one (a connect-and-close).
    if (auth) return refuse(c, Refusal::kHungUp, why);
    log::debug(options_.log_subsystem, "send to ", c.peer, " failed: ", why);
    return close(c, why);
  }
  c.out.clear();
  c.out_pos = 0;
  if (c.state == ServerConn::State::kClosing) close(c);
}

void ServerLoop::note_refusal(ServerConn& c, Refusal why, const std::string& specifics) {
  std::string note;
  if (refusal_log_.admit(Clock::now(), "refused", &note)) {
    log::warn(options_.log_subsystem, "refused ", c.peer, ": ", refusal_text(why),
              specifics.empty() ? "" : ": ", specifics, note);
  }
  // Counted after the line is written, so whoever sees the count can already see the line.
  if (why == Refusal::kBadHmac) stats_.auth_failures++;
  if (why != Refusal::kBadHmac && why != Refusal::kHungUp) stats_.dropped++;
  stats_.refused[size_t(why)]++;
}

void ServerLoop::refuse(ServerConn& c, Refusal why, const std::string& specifics) {
  note_refusal(c, why, specifics);
  close(c, detail::str(refusal_text(why), specifics.empty() ? "" : ": ", specifics));
}

void ServerLoop::drop(ServerConn& c, const std::string& why) {
  log::error(options_.log_subsystem, options_.name, " ", address_, ": dropping connection from ",
             c.peer, ": ", why);
  stats_.dropped++;
  close(c, why);
}

void ServerLoop::close(ServerConn& c, const std::string& why) {
  if (c.dead) return;
  c.dead = true;
  if (c.state != ServerConn::State::kReady) return;
  try {
    handler_->on_close(c, why);
  } catch (const std::exception& e) {
    log::error(options_.log_subsystem, options_.name, " ", address_, ": closing ", c.peer, ": ",
               e.what());
  }
}

void ServerLoop::expire(Clock::time_point now) {
  for (auto& [id, cp] : conns_) {
    ServerConn& c = *cp;
    if (c.dead) continue;
    if (c.state == ServerConn::State::kAuth && now >= c.deadline) {
      refuse(c, Refusal::kAuthTimeout,
             detail::str("did not authenticate within ", secs(options_.auth_timeout), " s"));
    } else if (c.state == ServerConn::State::kClosing && now >= c.deadline) {
      close(c);
    } else if (c.partial_since != Clock::time_point{} &&
               now >= c.partial_since + options_.frame_timeout) {
      refuse(c, Refusal::kFrameTimeout,
             detail::str(c.unparsed(), " bytes of a frame, nothing more for ",
                         secs(options_.frame_timeout), " s"));
    }
  }
  handler_->on_timer(now);
}

void ServerLoop::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->second->dead) {
      it = conns_.erase(it);
      stats_.open--;
    } else {
      ++it;
    }
  }
}

}  // namespace cohort::net
