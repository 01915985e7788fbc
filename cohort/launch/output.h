#pragma once
// Output relay: a worker's stdout or stderr arrives in arbitrary chunks; the launcher prints
// it again as whole lines, each prefixed "[rank R] ", so that lines of different ranks never
// interleave mid-line. The last few lines of each worker are kept for the failure message.
// Internal to launch/.
#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

namespace cohort::launch::detail {

// The last `capacity` lines of one worker (stdout and stderr together, in arrival order).
class LineTail {
 public:
  explicit LineTail(size_t capacity = 10) : capacity_(capacity) {}
  void push(std::string_view line);
  const std::deque<std::string>& lines() const { return lines_; }
  // "  line\n  line" or "  (no output)".
  std::string indented() const;

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

class LineRelay {
 public:
  // A line longer than this is cut and printed in pieces, so a worker that never prints a
  // newline cannot make the launcher buffer without bound.
  static constexpr size_t kMaxLine = size_t{64} << 10;

  // out_fd: where lines go (1 or 2); prefix: "[rank R] " or empty; tail: shared per worker.
  LineRelay(int out_fd, std::string prefix, LineTail* tail)
      : out_fd_(out_fd), prefix_(std::move(prefix)), tail_(tail) {}
  // Prints every complete line in data; keeps the rest for the next call.
  void feed(std::string_view data);
  // Prints a partial last line (with a newline added), e.g. when the worker exited.
  void flush();

 private:
  void emit(std::string_view line);

  int out_fd_;
  std::string prefix_;
  LineTail* tail_;
  std::string partial_;
};

// Writes all of data to fd, retrying on EINTR/EAGAIN for at most a few seconds (a stuck
// terminal must not hang the launcher forever). Returns false if it could not.
bool write_all(int fd, std::string_view data);

}  // namespace cohort::launch::detail
