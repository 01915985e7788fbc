#pragma once
// Small POSIX socket helpers shared by the store and (through auth.h) the data-plane
// transports. Every call that can block takes a Deadline and throws cohort::Timeout past it;
// peer failures throw cohort::IoError naming the peer. Sockets are used in non-blocking mode
// with poll(), so the same helpers serve blocking-style clients and event-loop servers.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace cohort::net {

using Deadline = std::chrono::steady_clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

// Owns a file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

void set_nonblocking(int fd);
// Small store and handshake messages must not wait for Nagle's algorithm.
void set_nodelay(int fd);
// "127.0.0.1:29500" or "[::1]:29500"; "<unknown>" if the socket has no address.
std::string peer_address(int fd);
std::string local_address(int fd);
uint16_t local_port(int fd);
// Milliseconds left until the deadline, clamped to [0, INT_MAX] for poll().
int poll_timeout_ms(Deadline deadline);

// Reads exactly n bytes. IoError if the peer closes or fails, Timeout at the deadline; both name
// `peer` ("store at 127.0.0.1:29500") and what was being read.
void read_exact(int fd, void* buf, size_t n, Deadline deadline, std::string_view peer,
                std::string_view what);
void write_all(int fd, const void* buf, size_t n, Deadline deadline, std::string_view peer,
               std::string_view what);
// Sends head then tail as one stream, straight from where they lie (one sendmsg over both: a
// tail of megabytes, a parameter-server push, is not copied behind the head first). The same
// errors as write_all.
void write_all_parts(int fd, std::span<const uint8_t> head, std::span<const uint8_t> tail,
                     Deadline deadline, std::string_view peer, std::string_view what);

struct Listener {
  Fd fd;              // non-blocking, listening
  std::string host;   // the bound address, e.g. "127.0.0.1"
  uint16_t port = 0;  // the bound port (chosen by the OS when 0 was asked for)
};
// Binds host:port (port 0: the OS picks) and listens. InvalidArgument for a host that does not
// resolve, IoError if bind/listen fail (the message names host and port).
Listener listen_tcp(const std::string& host, uint16_t port, int backlog);

// Connects to host:port, retrying refused or unreachable attempts with backoff until the
// deadline: the server may start after its clients. Returns a non-blocking socket with
// TCP_NODELAY. Timeout names the last error and `what` ("store at 10.0.0.1:29500").
Fd connect_tcp(const std::string& host, uint16_t port, Deadline deadline, std::string_view what);

// "host:port", with brackets around an IPv6 host.
std::string join_host_port(const std::string& host, uint16_t port);

}  // namespace cohort::net
