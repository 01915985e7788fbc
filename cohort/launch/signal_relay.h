#pragma once
// SignalRelay: while alive, SIGINT and SIGTERM to this process are not acted on in the handler
// (nothing is async-signal-safe enough to stop workers there); the handler only writes the
// signal number to a self-pipe, which the launcher's poll loop watches. The destructor restores
// the previous handlers. Signal handlers are process-global, so only one relay may exist at a
// time: a second one throws InvalidArgument. Internal to launch/.
#include <signal.h>

namespace cohort::launch::detail {

class SignalRelay {
 public:
  SignalRelay();  // installs the handlers; IoError if the pipe cannot be made
  ~SignalRelay();
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return read_fd_; }  // readable when a signal arrived (non-blocking)
  // The next signal received, or 0 if none is pending.
  int take();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace cohort::launch::detail
