#pragma once
// Bounds how many lines one source of repeated log lines (e.g. a server refusing a flood of bad
// connections) prints: at most `lines` per `window`; the ones held back are counted and the next
// line that is printed says how many. So a flood cannot drown the log or slow the loop that
// writes it, and nobody reading the log loses count.
//
// Not thread-safe: owned by one thread (the store server's event loop). Time is passed in, so
// tests drive it with a fake clock.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace cohort::log {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    int lines = 5;                           // printed per window, at most
    std::chrono::milliseconds window{1000};  // a fixed window, starting at its first line
  };

  explicit RateLimiter(Options options);
  RateLimiter() : RateLimiter(Options{}) {}

  // Whether a line may be printed at `now`. If so, *note is what to append to it: empty, or
  // " (+37 more refused in the last 1.2 s)" when lines were held back since the previous printed
  // one (`what` is the verb: "refused"). If not, the line is counted as held back.
  bool admit(Clock::time_point now, std::string_view what, std::string* note);

  uint64_t held_back() const { return held_back_; }  // since the last printed line
  uint64_t held_back_total() const { return held_back_total_; }

 private:
  Options options_;
  Clock::time_point window_start_{};
  Clock::time_point last_printed_{};
  int printed_in_window_ = 0;
  bool started_ = false;
  uint64_t held_back_ = 0;
  uint64_t held_back_total_ = 0;
};

}  // namespace cohort::log
