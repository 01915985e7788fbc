// log::RateLimiter (with a fake clock) and log::ScopedCapture.
#include <gtest/gtest.h>

#include <thread>

#include "cohort/core/log_rate_limiter.h"
#include "cohort/core/logging.h"

namespace cohort::log {
namespace {

using namespace std::chrono_literals;
using TimePoint = RateLimiter::Clock::time_point;

TEST(LogRateLimiter, AdmitsAtMostLinesPerWindowAndReportsTheRestOnTheNextLine) {
  RateLimiter limiter({.lines = 3, .window = 1000ms});
  TimePoint t0{};  // the fake clock
  std::string note = "stale";
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.admit(t0 + i * 10ms, "refused", &note)) << i;
    EXPECT_EQ(note, "");
  }
  for (int i = 0; i < 37; ++i) EXPECT_FALSE(limiter.admit(t0 + 500ms, "refused", &note)) << i;
  EXPECT_EQ(limiter.held_back(), 37u);
  // Still inside the window that began at t0.
  EXPECT_FALSE(limiter.admit(t0 + 999ms, "refused", &note));
  // A new window: printed, saying how many were held back since the last printed line (t0+20ms).
  EXPECT_TRUE(limiter.admit(t0 + 1220ms, "refused", &note));
  EXPECT_EQ(note, " (+38 more refused in the last 1.2 s)");
  EXPECT_EQ(limiter.held_back(), 0u);
  EXPECT_EQ(limiter.held_back_total(), 38u);
  EXPECT_TRUE(limiter.admit(t0 + 1230ms, "refused", &note));
  EXPECT_EQ(note, "");
}

TEST(LogRateLimiter, AQuietSourceIsNeverHeldBack) {
  RateLimiter limiter({.lines = 1, .window = 100ms});
  std::string note;
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(limiter.admit(TimePoint{} + i * 100ms, "x", &note));
  EXPECT_EQ(limiter.held_back_total(), 0u);
}

TEST(LogRateLimiter, RejectsAnEmptyBudget) {
  EXPECT_THROW(RateLimiter({.lines = 0}), InvalidArgument);
}

TEST(LogCapture, SeesLinesFromEveryThreadWhileItLives) {
  warn("test", "before any capture");
  ScopedCapture outer;
  {
    ScopedCapture inner;
    std::thread([] { warn("test", "from another thread ", 7); }).join();
    EXPECT_EQ(inner.count("from another thread 7"), 1u);
  }
  warn("test", "after the inner one ended");
  const auto lines = outer.lines();
  ASSERT_EQ(lines.size(), 2u) << outer.text();
  EXPECT_EQ(lines[0].level, Level::kWarn);
  EXPECT_EQ(lines[0].subsystem, "test");
  EXPECT_EQ(lines[0].message, "from another thread 7");
  EXPECT_EQ(outer.count("before any capture"), 0u);
  EXPECT_EQ(outer.text(), "test: from another thread 7\ntest: after the inner one ended\n");
}

}  // namespace
}  // namespace cohort::log
