#pragma once
// Levelled logging with a subsystem and the rank in every line (DESIGN convention 7).
// The level is read once from COHORT_LOG_LEVEL (debug|info|warn|error) and can be set at run time.
#include <string_view>

#include "cohort/core/error.h"

namespace cohort::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
Level level();
// The rank printed in each line; -1 (the default) prints no rank.
void set_rank(int rank);
void write(Level level, std::string_view subsystem, const std::string& message);

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
