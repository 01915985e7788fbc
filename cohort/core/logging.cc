#include "cohort/core/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace cohort::log {
namespace {

Level level_from_env() {
  const char* v = std::getenv("COHORT_LOG_LEVEL");
  if (!v) return Level::kInfo;
  if (!std::strcmp(v, "debug")) return Level::kDebug;
  if (!std::strcmp(v, "warn")) return Level::kWarn;
  if (!std::strcmp(v, "error")) return Level::kError;
  return Level::kInfo;
}

std::atomic<Level>& current_level() {
  static std::atomic<Level> lvl{level_from_env()};
  return lvl;
}
std::atomic<int> g_rank{-1};
std::mutex g_write_mu;  // keeps lines from interleaving across threads

const char* level_name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "D";
    case Level::kInfo:
      return "I";
    case Level::kWarn:
      return "W";
    case Level::kError:
      return "E";
  }
  return "?";
}

}  // namespace

void set_level(Level l) {
  current_level().store(l);
}
Level level() {
  return current_level().load(std::memory_order_relaxed);
}
void set_rank(int rank) {
  g_rank.store(rank);
}

void write(Level l, std::string_view sub, const std::string& message) {
  using namespace std::chrono;
  double t = duration<double>(steady_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(g_write_mu);
  int rank = g_rank.load();
  if (rank >= 0)
    std::fprintf(stderr, "[%s %.3f r%d %.*s] %s\n", level_name(l), t, rank, int(sub.size()),
                 sub.data(), message.c_str());
  else
    std::fprintf(stderr, "[%s %.3f %.*s] %s\n", level_name(l), t, int(sub.size()), sub.data(),
                 message.c_str());
}

}  // namespace cohort::log
