#pragma once
// Elapsed time on the monotonic clock, the one every timer in cohort reads (step times,
// deadlines, progress): wall-clock changes (NTP, suspend) never make a duration negative.
#include <chrono>

namespace cohort {

// Seconds from `start` to now, as a double (for logs, metrics and rates).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace cohort
