// The adaptive spin budget of transport waits (cohort/comm/transport/backoff.h).
#include <gtest/gtest.h>

#include "cohort/comm/transport/backoff.h"

namespace cohort::comm::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

TEST(AdaptiveSpin, WaitsThatNeverPausedLeaveTheBudgetAlone) {
  // A rank that alternately waits and finds its data ready must not climb back to the full
  // budget on the ready waits (that kept two ranks sharing a core at ~100 us a step).
  AdaptiveSpin s;
  s.reset(microseconds(100));
  for (int i = 0; i < 20; ++i) {
    s.update(/*paused=*/true, /*gave_up_spinning=*/true);
    s.update(/*paused=*/false, /*gave_up_spinning=*/false);
  }
  EXPECT_EQ(s.now(), AdaptiveSpin::kFloor);
}

TEST(AdaptiveSpin, HalvesToAFloorAndGrowsBackWhenSpinningPays) {
  AdaptiveSpin s;
  s.reset(microseconds(100));
  s.update(true, true);
  EXPECT_EQ(s.now(), microseconds(50));
  for (int i = 0; i < 20; ++i) s.update(true, true);
  EXPECT_EQ(s.now(), AdaptiveSpin::kFloor);  // never 0: it can find out spinning pays again
  s.update(true, false);
  EXPECT_EQ(s.now(), AdaptiveSpin::kFloor * 2 + microseconds(1));
  for (int i = 0; i < 20; ++i) s.update(true, false);
  EXPECT_EQ(s.now(), microseconds(100));  // capped at the policy's spin
}

TEST(AdaptiveSpin, ZeroPolicySpinStaysZero) {
  // Oversubscribed hosts never spin.
  AdaptiveSpin s;
  s.reset(nanoseconds(0));
  s.update(true, false);
  EXPECT_EQ(s.now(), nanoseconds(0));
  s.update(true, true);
  EXPECT_EQ(s.now(), nanoseconds(0));
}

TEST(Backoff, ReportsWhetherItPausedAndGaveUpSpinning) {
  Backoff::Policy p;
  p.spin = microseconds(0);
  p.yield = microseconds(50);
  Backoff b(p);
  EXPECT_FALSE(b.paused());
  EXPECT_FALSE(b.gave_up_spinning());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  b.pause(nullptr, 0, /*polling=*/true, deadline);
  EXPECT_TRUE(b.paused());
  EXPECT_TRUE(b.gave_up_spinning());  // no spin budget: the first pause yields
}

}  // namespace
}  // namespace cohort::comm::transport
