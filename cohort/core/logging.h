#pragma once
// Levelled logging with a subsystem and the rank in every line (DESIGN convention 7).
// The level is read once from COHORT_LOG_LEVEL (debug|info|warn|error) and can be set at run time.
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
Level level();
// The rank printed in each line; -1 (the default) prints no rank.
void set_rank(int rank);
void write(Level level, std::string_view subsystem, const std::string& message);

// One line as write() received it, without the time and rank that stderr gets.
struct Line {
  Level level;
  std::string subsystem;
  std::string message;
};

// Collects every line written while it lives, from any thread, so that a test can assert on
// what was logged without redirecting stderr (lines still go there too). Captures nest; each
// sees every line. Registered in the logging module's own list, under its write lock: the only
// state this adds beside the level and rank.
class ScopedCapture {
 public:
  ScopedCapture();
  ~ScopedCapture();
  ScopedCapture(const ScopedCapture&) = delete;
  ScopedCapture& operator=(const ScopedCapture&) = delete;

  std::vector<Line> lines() const;
  // How many captured messages contain `needle`.
  size_t count(std::string_view needle) const;
  // Every captured line as "<subsystem>: <message>\n", for failure messages.
  std::string text() const;

 private:
  friend void write(Level, std::string_view, const std::string&);
  mutable std::mutex mu_;  // lines_ is appended by any thread that logs
  std::vector<Line> lines_;
};

template <typename... Args>
void debug(std::string_view sub, const Args&... a) {
  if (level() <= Level::kDebug) write(Level::kDebug, sub, detail::str(a...));
}
template <typename... Args>
void info(std::string_view sub, const Args&... a) {
  if (level() <= Level::kInfo) write(Level::kInfo, sub, detail::str(a...));
}
template <typename... Args>
void warn(std::string_view sub, const Args&... a) {
  if (level() <= Level::kWarn) write(Level::kWarn, sub, detail::str(a...));
}
template <typename... Args>
void error(std::string_view sub, const Args&... a) {
  write(Level::kError, sub, detail::str(a...));
}

}  // namespace cohort::log
