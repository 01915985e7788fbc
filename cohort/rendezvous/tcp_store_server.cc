#include "cohort/rendezvous/tcp_store_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/rendezvous/server_impl.h"

namespace cohort::rendezvous {
namespace {

constexpr std::string_view kLog = "store";
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
  }
  return "?";
}

uint64_t TcpStoreServer::Stats::refused_total() const {
  uint64_t n = 0;
  for (uint64_t r : refused) n += r;
  return n;
}

TcpStoreServer::Impl::Impl(TcpStoreServerOptions options) : options_(std::move(options)) {
  check_secret(options_.secret, options_.secret_policy, "TcpStoreServer");
  COHORT_CHECK_ARG(!options_.secret.empty() || is_loopback_host(options_.host),
                   "TcpStoreServer: refusing to serve ", options_.host,
                   " without a job secret; insecure mode is for loopback only");
  COHORT_CHECK_ARG(options_.auth_timeout.count() > 0, "TcpStoreServer: auth_timeout must be > 0");
  listener_ = listen_tcp(options_.host, options_.port, options_.backlog);
  address_ = join_host_port(listener_.host, listener_.port);
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  COHORT_CHECK_IO(wake_fd_.valid(), "TcpStoreServer: eventfd failed: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
  log::debug(kLog, "store server listening on ", address_);  // launchers print their own line
}

TcpStoreServer::Impl::~Impl() {
  stop_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  log_refusal_totals();
}

// One line at shutdown with every refusal, including the ones the rate limit held back.
void TcpStoreServer::Impl::log_refusal_totals() const {
  const Stats s = stats();
  if (s.refused_total() == 0) return;
  std::string by_reason;
  for (size_t i = 0; i < kRefusalKinds; ++i) {
    if (s.refused[i] == 0) continue;
    by_reason +=
        detail::str(by_reason.empty() ? "" : ", ", s.refused[i], " ", refusal_name(Refusal(i)));
  }
  const uint64_t n = s.refused_total();
  log::info(kLog, "store server ", address_, ": refused ", n, n == 1 ? " peer" : " peers",
            " in all (", by_reason, ")");
}

TcpStoreServer::Stats TcpStoreServer::Impl::stats() const {
  Stats s;
  s.accepted = stats_.accepted.load();
  s.authenticated = stats_.authenticated.load();
  s.auth_failures = stats_.auth_failures.load();
  s.dropped = stats_.dropped.load();
  s.open = stats_.open.load();
  s.keys = stats_.keys.load();
  for (size_t i = 0; i < kRefusalKinds; ++i) s.refused[i] = stats_.refused[i].load();
  return s;
}

void TcpStoreServer::Impl::run() {
  while (!stop_.load()) {
    try {
      poll_once();
    } catch (const std::exception& e) {
      // Only poll() itself failing gets here (per-connection errors drop that connection).
      // No exit() in a library: log, back off, and keep serving.
      log::error(kLog, "store server ", address_, ": event loop error: ", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  conns_.clear();
  stats_.open.store(0);
}

int TcpStoreServer::Impl::next_timeout_ms() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [id, c] : conns_) {
    if (c->state != ServerConn::State::kReady) next = std::min(next, c->deadline);
    if (c->parked) next = std::min(next, c->park_deadline);
  }
  if (accept_paused_until_ > Clock::now()) next = std::min(next, accept_paused_until_);
  return next == Clock::time_point::max() ? -1 : poll_timeout_ms(next);
}

void TcpStoreServer::Impl::poll_once() {
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
    if (c->state != ServerConn::State::kClosing && c->unsent() < kServerMaxUnsent) ev |= POLLIN;
    if (c->unsent() > 0) ev |= POLLOUT;
    fds.push_back({c->fd.get(), ev, 0});
    owners.push_back(c.get());
  }
  int rc = ::poll(fds.data(), fds.size(), next_timeout_ms());
  if (rc < 0 && errno != EINTR) throw IoError(detail::str("poll: ", std::strerror(errno)));
  if (stop_.load()) return;
  if (rc > 0) {
    if (accepting && (fds[1].revents & POLLIN)) accept_all();
    for (size_t i = 0; i < fds.size(); ++i) {
      ServerConn* c = owners[i];
      if (!c || !fds[i].revents || c->dead) continue;
      try {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(*c);
        if (!c->dead && (fds[i].revents & POLLOUT)) flush(*c);
        if (!c->dead) process(*c);
      } catch (const std::exception& e) {
        drop(*c, detail::str("internal error: ", e.what()));
      }
    }
  }
  // Connections woken by another client's write may have frames queued behind the answered one.
  while (!resume_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(resume_);
    for (uint64_t id : ids) {
      auto it = conns_.find(id);
      if (it != conns_.end() && !it->second->dead) process(*it->second);
    }
  }
  expire(Clock::now());
  reap();
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log::warn(kLog, "store server ", address_, ": cannot accept (", std::strerror(errno),
                  "); pausing accepts for 100 ms");
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
    c->handshake.emplace(options_.secret, auth::kStoreContext);
    const auto& ch = c->handshake->challenge();
    c->out.assign(ch.begin(), ch.end());
    stats_.accepted++;
    stats_.open++;
    log::debug(kLog, "accepted ", c->peer);
    ServerConn& ref = *c;
    conns_.emplace(c->id, std::move(c));
    flush(ref);
  }
}

void TcpStoreServer::Impl::on_readable(ServerConn& c) {
  if (c.state == ServerConn::State::kAuth) return read_handshake(c);
  if (c.state == ServerConn::State::kReady) return read_requests(c);
  // kClosing: discard whatever arrives; a hang-up ends it.
  uint8_t sink[512];
  ssize_t r = ::recv(c.fd.get(), sink, sizeof(sink), MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) kill(c);
}

void TcpStoreServer::Impl::read_handshake(ServerConn& c) {
  // Read no more than the response: nothing else is read before the peer is authenticated.
  size_t have = c.in.size();
  c.in.resize(auth::kResponseBytes);
  ssize_t r = ::recv(c.fd.get(), c.in.data() + have, auth::kResponseBytes - have, MSG_DONTWAIT);
  c.in.resize(have + size_t(std::max<ssize_t>(r, 0)));
  if (r == 0) return refuse(c, Refusal::kHungUp, "");
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
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
    stats_.authenticated++;
    log::debug(kLog, "authenticated ", c.peer);
  } else {
    // The result tells the peer it was refused; close once it is sent.
    note_refusal(c, Refusal::kBadHmac, "");
    c.state = ServerConn::State::kClosing;
    c.deadline = Clock::now() + kCloseGrace;
  }
  flush(c);
}

void TcpStoreServer::Impl::read_requests(ServerConn& c) {
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos > kReadChunk) {
    c.in.erase(c.in.begin(), c.in.begin() + ptrdiff_t(c.in_pos));
    c.in_pos = 0;
  }
  size_t have = c.in.size();
  c.in.resize(have + kReadChunk);
  ssize_t r = ::recv(c.fd.get(), c.in.data() + have, kReadChunk, MSG_DONTWAIT);
  c.in.resize(have + size_t(std::max<ssize_t>(r, 0)));
  if (r == 0) {
    log::debug(kLog, c.peer, " disconnected");
    return kill(c);
  }
  if (r < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    log::debug(kLog, c.peer, " read failed: ", std::strerror(errno));
    return kill(c);
  }
  // A parked client should be silent; one that keeps sending is not a cohort client.
  if (c.unparsed() > wire::kHeaderBytes + wire::kMaxBodyBytes)
    refuse(c, Refusal::kBadFrame,
           detail::str("sent ", c.unparsed(), " bytes without waiting for answers"));
}

void TcpStoreServer::Impl::flush(ServerConn& c) {
  while (c.unsent() > 0) {
    ssize_t r =
        ::send(c.fd.get(), c.out.data() + c.out_pos, c.unsent(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      log::debug(kLog, "send to ", c.peer, " failed: ", std::strerror(errno));
      return kill(c);
    }
    c.out_pos += size_t(r);
  }
  c.out.clear();
  c.out_pos = 0;
  if (c.state == ServerConn::State::kClosing) kill(c);
}

void TcpStoreServer::Impl::note_refusal(ServerConn& c, Refusal why, const std::string& specifics) {
  std::string note;
  if (refusal_log_.admit(Clock::now(), "refused", &note)) {
    log::warn(kLog, "refused ", c.peer, ": ", refusal_text(why), specifics.empty() ? "" : ": ",
              specifics, note);
  }
  // Counted after the line is written, so whoever sees the count can already see the line.
  if (why == Refusal::kBadHmac) stats_.auth_failures++;
  if (why != Refusal::kBadHmac && why != Refusal::kHungUp) stats_.dropped++;
  stats_.refused[size_t(why)]++;
}

void TcpStoreServer::Impl::refuse(ServerConn& c, Refusal why, const std::string& specifics) {
  note_refusal(c, why, specifics);
  kill(c);
}

void TcpStoreServer::Impl::drop(ServerConn& c, const std::string& why) {
  log::error(kLog, "store server ", address_, ": dropping connection from ", c.peer, ": ", why);
  stats_.dropped++;
  kill(c);
}

void TcpStoreServer::Impl::kill(ServerConn& c) {
  if (c.dead) return;
  unpark(c);
  c.dead = true;
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (auto& [id, cp] : conns_) {
    ServerConn& c = *cp;
    if (c.dead) continue;
    if (c.state == ServerConn::State::kAuth && now >= c.deadline) {
      refuse(c, Refusal::kAuthTimeout,
             detail::str("did not authenticate within ", secs(options_.auth_timeout), " s"));
    } else if (c.state == ServerConn::State::kClosing && now >= c.deadline) {
      kill(c);
    } else if (c.parked && now >= c.park_deadline) {
      wire::Response r;
      r.status = wire::Status::kTimeout;
      r.keys = table_.missing(c.parked->keys);
      wire::Command cmd = c.parked->command;
      unpark(c);
      reply(c, cmd, r);
      resume_.push_back(c.id);
    }
  }
  // Serve frames the client queued behind a wait that just timed out.
  for (uint64_t id : std::exchange(resume_, {})) {
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->dead) process(*it->second);
  }
}

void TcpStoreServer::Impl::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->second->dead) {
      it = conns_.erase(it);
      stats_.open--;
    } else {
      ++it;
    }
  }
  stats_.keys.store(table_.size());
}

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
TcpStoreServer::~TcpStoreServer() = default;
const std::string& TcpStoreServer::host() const {
  return impl_->listener_.host;
}
uint16_t TcpStoreServer::port() const {
  return impl_->listener_.port;
}
std::string TcpStoreServer::address() const {
  return impl_->address_;
}
TcpStoreServer::Stats TcpStoreServer::stats() const {
  return impl_->stats();
}

}  // namespace cohort::rendezvous
