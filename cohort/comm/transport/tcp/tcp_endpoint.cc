#include "cohort/comm/transport/tcp/tcp_endpoint.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cohort/comm/transport/tcp/tcp_pair.h"
#include "cohort/core/logging.h"
#include "cohort/net/auth.h"

namespace cohort::comm::transport {
namespace {

constexpr std::string_view kAuthContext = "cohort-tcp-v1";
constexpr uint32_t kHelloMagic = 0x31485463;  // "cTH1"

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint32_t reserved;
};

// "host:port" -> (host, port); IPv6 hosts come in brackets.
std::pair<std::string, uint16_t> split_address(const std::string& address) {
  size_t colon = address.rfind(':');
  COHORT_CHECK_IO(colon != std::string::npos && colon + 1 < address.size(),
                  "tcp transport: malformed peer address '", address, "'");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, uint16_t(std::stoi(address.substr(colon + 1)))};
}

void set_buffers(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

}  // namespace

TcpEndpoint::TcpEndpoint(const DeviceOptions& options, int rank, int size, Notifier* notifier)
    : options_(options), rank_(rank), size_(size), notifier_(notifier) {
  listener_ = net::listen_tcp(options.bind_address, 0, std::max(size, 16));
  std::string host = options.advertise_address.empty() ? listener_.host : options.advertise_address;
  address_ = net::join_host_port(host, listener_.port);
}

TcpEndpoint::~TcpEndpoint() {
  stop();
}

std::unique_ptr<TcpPair> TcpEndpoint::make_pair(int peer, net::Fd fd) {
  net::set_nonblocking(fd.get());
  net::set_nodelay(fd.get());
  set_buffers(fd.get(), options_.tcp_socket_buffer);
  return std::make_unique<TcpPair>(rank_, peer, std::move(fd), notifier_);
}

std::unique_ptr<TcpPair> TcpEndpoint::connect_to(int peer, const std::string& address,
                                                 Deadline deadline) {
  auto [host, port] = split_address(address);
  std::string who = detail::str("rank ", peer, " at ", address);
  net::Fd fd = net::connect_tcp(host, port, deadline, who);
  if (!options_.secret.empty()) {
    net::auth::answer_challenge(fd.get(), options_.secret, kAuthContext, deadline, who);
  }
  Hello hello{kHelloMagic, rank_, size_, 0};
  net::write_all(fd.get(), &hello, sizeof(hello), deadline, who, "hello");
  return make_pair(peer, std::move(fd));
}

int TcpEndpoint::read_hello(int fd, Deadline deadline, const std::string& who) {
  if (!options_.secret.empty()) {
    net::auth::serve_challenge(fd, options_.secret, kAuthContext, deadline, who);
  }
  Hello hello{};
  net::read_exact(fd, &hello, sizeof(hello), deadline, who, "hello");
  COHORT_CHECK_IO(hello.magic == kHelloMagic, "tcp transport: ", who, " sent a bad hello (magic 0x",
                  std::hex, hello.magic, ")");
  COHORT_CHECK_IO(hello.size == size_, "tcp transport: ", who, " says the world has ", hello.size,
                  " ranks, rank ", rank_, " has ", size_);
  return hello.rank;
}

std::vector<std::unique_ptr<TcpPair>> TcpEndpoint::accept_from(const std::vector<int>& peers,
                                                               Deadline deadline) {
  std::vector<std::unique_ptr<TcpPair>> out(peers.size());
  size_t missing = peers.size();
  while (missing > 0) {
    pollfd pfd{listener_.fd.get(), POLLIN, 0};
    int n = ::poll(&pfd, 1, net::poll_timeout_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || Clock::now() >= deadline) {
      std::string names;
      for (size_t i = 0; i < peers.size(); ++i) {
        if (!out[i]) names += detail::str(names.empty() ? "" : ", ", peers[i]);
      }
      throw Timeout(detail::str("tcp transport: rank ", rank_, " (listening on ", address_,
                                ") timed out waiting for rank(s) ", names,
                                " to connect; check that they are running"));
    }
    int c = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) continue;  // EAGAIN, ECONNABORTED...: poll again
    net::Fd fd(c);
    std::string who = detail::str("connection from ", net::peer_address(c));
    try {
      int rank = read_hello(c, deadline, who);
      size_t i = 0;
      while (i < peers.size() && peers[i] != rank) ++i;
      COHORT_CHECK_IO(i < peers.size() && !out[i], "tcp transport: ", who, " claims to be rank ",
                      rank, ", which is not expected here");
      out[i] = make_pair(rank, std::move(fd));
      --missing;
    } catch (const Timeout&) {
      throw;
    } catch (const Error& e) {
      // Garbage, a wrong secret or a stray client: drop it and keep waiting for the peers.
      log::warn("comm", "tcp transport: rank ", rank_, " dropped ", who, ": ", e.what());
    }
  }
  return out;
}

void TcpEndpoint::start(const std::vector<TcpPair*>& pairs) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  COHORT_CHECK_IO(epoll_.valid() && wake_.valid(),
                  "tcp transport: epoll/eventfd: ", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up eventfd
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  for (TcpPair* p : pairs) {
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = p;
    COHORT_CHECK_IO(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p->fd(), &ev) == 0,
                    "tcp transport: epoll_ctl for rank ", p->peer(), ": ", std::strerror(errno));
  }
  thread_ = std::thread([this] { loop(); });
}

void TcpEndpoint::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void TcpEndpoint::loop() {
  epoll_event events[64];
  while (!stopping_.load()) {
    int n = ::epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("comm", "tcp transport: epoll_wait failed: ", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) continue;  // stop() rang
      auto* pair = static_cast<TcpPair*>(events[i].data.ptr);
      try {
        pair->on_event(events[i].events);
      } catch (...) {  // never let an error kill the loop thread: it belongs to the op
        pair->abort(std::current_exception());
      }
    }
  }
}

}  // namespace cohort::comm::transport
