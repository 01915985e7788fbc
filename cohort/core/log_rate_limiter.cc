#include "cohort/core/log_rate_limiter.h"

#include <cstdio>

#include "cohort/core/error.h"

namespace cohort::log {

RateLimiter::RateLimiter(Options options) : options_(options) {
  COHORT_CHECK_ARG(options_.lines > 0 && options_.window.count() > 0, "log::RateLimiter: lines (",
                   options_.lines, ") and window (", options_.window.count(), " ms) must be > 0");
}

bool RateLimiter::admit(Clock::time_point now, std::string_view what, std::string* note) {
  if (!started_ || now - window_start_ >= options_.window) {
    started_ = true;
    window_start_ = now;
    printed_in_window_ = 0;
  }
  if (printed_in_window_ >= options_.lines) {
    held_back_++;
    held_back_total_++;
    return false;
  }
  printed_in_window_++;
  note->clear();
  if (held_back_ > 0) {
    const double secs = std::chrono::duration<double>(now - last_printed_).count();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", secs);
    *note = detail::str(" (+", held_back_, " more ", what, " in the last ", buf, " s)");
    held_back_ = 0;
  }
  last_printed_ = now;
  return true;
}

}  // namespace cohort::log
