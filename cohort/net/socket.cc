#include "cohort/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <thread>

#include "cohort/core/error.h"

namespace cohort::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string format_sockaddr(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return join_host_port(host, ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return join_host_port(host, ntohs(a->sin6_port));
  }
  return "<unknown>";
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// Empty pointer and *error set when host does not resolve.
AddrInfoPtr resolve(const std::string& host, uint16_t port, int flags, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    *error = detail::str("cannot resolve host '", host, "': ", gai_strerror(rc));
    return nullptr;
  }
  return AddrInfoPtr(res);
}

// Waits for `events` on fd until the deadline. False on timeout.
bool poll_one(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    COHORT_CHECK_IO(errno == EINTR, "poll failed: ", std::strerror(errno));
  }
}

// One non-blocking connect attempt to one address. Returns the socket or sets *error.
Fd try_connect(const addrinfo* ai, Deadline deadline, std::string* error) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd.valid()) {
    *error = std::strerror(errno);
    return Fd();
  }
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *error = std::strerror(errno);
      return Fd();
    }
    if (!poll_one(fd.get(), POLLOUT, deadline)) {
      *error = "connect did not complete";
      return Fd();
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      *error = std::strerror(err);
      return Fd();
    }
  }
  return fd;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  COHORT_CHECK_IO(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0,
                  "fcntl(O_NONBLOCK) failed: ", std::strerror(errno));
}

void set_nodelay(int fd) {
  int one = 1;
  // Fails harmlessly on non-TCP sockets (socketpair in tests).
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "<unknown>";
  return format_sockaddr(ss);
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "<unknown>";
  return format_sockaddr(ss);
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  COHORT_CHECK_IO(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0,
                  "getsockname failed: ", std::strerror(errno));
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

int poll_timeout_ms(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  // Round up so a wait of 0.4 ms does not spin with timeout 0.
  int64_t ms = left.count() + 1;
  return int(std::clamp<int64_t>(ms, 0, INT_MAX));
}

std::string join_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

void read_exact(int fd, void* buf, size_t n, Deadline deadline, std::string_view peer,
                std::string_view what) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, p + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += size_t(r);
      continue;
    }
    COHORT_CHECK_IO(r != 0, peer, " closed the connection while we read ", what, " (", got, " of ",
                    n, " bytes received)");
    if (errno == EINTR) continue;
    COHORT_CHECK_IO(errno == EAGAIN || errno == EWOULDBLOCK, "reading ", what, " from ", peer,
                    " failed: ", std::strerror(errno));
    COHORT_CHECK_T(poll_one(fd, POLLIN, deadline), Timeout, "timed out reading ", what, " from ",
                   peer, " (", got, " of ", n, " bytes received)");
  }
}

void write_all(int fd, const void* buf, size_t n, Deadline deadline, std::string_view peer,
               std::string_view what) {
  write_all_parts(fd, {static_cast<const uint8_t*>(buf), n}, {}, deadline, peer, what);
}

void write_all_parts(int fd, std::span<const uint8_t> head, std::span<const uint8_t> tail,
                     Deadline deadline, std::string_view peer, std::string_view what) {
  const size_t total = head.size() + tail.size();
  size_t sent = 0;
  while (sent < total) {
    iovec iov[2];
    int parts = 0;
    if (sent < head.size())
      iov[parts++] = {const_cast<uint8_t*>(head.data()) + sent, head.size() - sent};
    const size_t in_tail = sent > head.size() ? sent - head.size() : 0;
    if (in_tail < tail.size())
      iov[parts++] = {const_cast<uint8_t*>(tail.data()) + in_tail, tail.size() - in_tail};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = size_t(parts);
    ssize_t r = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r >= 0) {
      sent += size_t(r);
      continue;
    }
    if (errno == EINTR) continue;
    COHORT_CHECK_IO(errno == EAGAIN || errno == EWOULDBLOCK, "sending ", what, " to ", peer,
                    " failed: ", std::strerror(errno));
    COHORT_CHECK_T(poll_one(fd, POLLOUT, deadline), Timeout, "timed out sending ", what, " to ",
                   peer, " (", sent, " of ", total, " bytes sent)");
  }
}

Listener listen_tcp(const std::string& host, uint16_t port, int backlog) {
  std::string error;
  AddrInfoPtr res = resolve(host, port, AI_PASSIVE, &error);
  COHORT_CHECK_ARG(res != nullptr, "listen on ", join_host_port(host, port), ": ", error);
  for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      error = std::strerror(errno);
      continue;
    }
    Listener l;
    std::string bound = local_address(fd.get());
    l.port = local_port(fd.get());
    // local_address gives "host:port" or "[v6]:port"; keep the host part only.
    l.host = bound.substr(0, bound.rfind(':'));
    if (!l.host.empty() && l.host.front() == '[') l.host = l.host.substr(1, l.host.size() - 2);
    l.fd = std::move(fd);
    return l;
  }
  throw IoError(detail::str("cannot listen on ", join_host_port(host, port), ": ", error));
}

Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, std::string_view what) {
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  std::string error = "no attempt made";
  for (;;) {
    AddrInfoPtr res = resolve(host, port, 0, &error);
    for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
      Fd fd = try_connect(ai, deadline, &error);
      if (fd.valid()) {
        set_nodelay(fd.get());
        return fd;
      }
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  double waited = std::chrono::duration<double>(Clock::now() - start).count();
  throw Timeout(detail::str("could not connect to ", what, " within ", waited, " s: ", error,
                            "; check that it is running and that the address and port are right"));
}

}  // namespace cohort::net
