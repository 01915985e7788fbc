#include "cohort/launch/signal_relay.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "cohort/core/error.h"

namespace cohort::launch::detail {
namespace {

// The one piece of global state: a signal handler cannot be given a context pointer.
std::atomic<int> g_write_fd{-1};

extern "C" void on_signal(int sig) {
  int saved = errno;
  int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    unsigned char b = static_cast<unsigned char>(sig);
    ssize_t ignored = ::write(fd, &b, 1);  // a full pipe just drops the duplicate
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

SignalRelay::SignalRelay() {
  int fds[2];
  COHORT_CHECK_IO(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0,
                  "cohort run: cannot create the signal pipe: ", strerror(errno));
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw InvalidArgument(
        "cohort::launch::run: another launcher is already running in this process (signal "
        "handlers are process-wide; run one launcher at a time)");
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

SignalRelay::~SignalRelay() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_write_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

int SignalRelay::take() {
  unsigned char b = 0;
  ssize_t n = ::read(read_fd_, &b, 1);
  return n == 1 ? static_cast<int>(b) : 0;
}

}  // namespace cohort::launch::detail
