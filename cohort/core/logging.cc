#include "cohort/core/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

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
std::mutex g_write_mu;  // keeps lines from interleaving across threads; guards g_captures
std::vector<ScopedCapture*> g_captures;  // the live ScopedCaptures, oldest first

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
  for (ScopedCapture* c : g_captures) {
    std::lock_guard<std::mutex> capture_lock(c->mu_);  // lock order: g_write_mu, then mu_
    c->lines_.push_back(Line{l, std::string(sub), message});
  }
  int rank = g_rank.load();
  if (rank >= 0)
    std::fprintf(stderr, "[%s %.3f r%d %.*s] %s\n", level_name(l), t, rank, int(sub.size()),
                 sub.data(), message.c_str());
  else
    std::fprintf(stderr, "[%s %.3f %.*s] %s\n", level_name(l), t, int(sub.size()), sub.data(),
                 message.c_str());
}

ScopedCapture::ScopedCapture() {
  std::lock_guard<std::mutex> lock(g_write_mu);
  g_captures.push_back(this);
}

ScopedCapture::~ScopedCapture() {
  std::lock_guard<std::mutex> lock(g_write_mu);
  std::erase(g_captures, this);
}

std::vector<Line> ScopedCapture::lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

size_t ScopedCapture::count(std::string_view needle) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Line& l : lines_) n += l.message.find(needle) != std::string::npos;
  return n;
}

std::string ScopedCapture::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const Line& l : lines_) out += l.subsystem + ": " + l.message + "\n";
  return out;
}

}  // namespace cohort::log
