// The consistency bookkeeping alone (ps/consistency.h): the SSP gate and straggler detection.
#include "cohort/ps/consistency.h"

#include <gtest/gtest.h>

#include "cohort/core/error.h"

namespace cohort::ps {
namespace {

TEST(SspGate, AWorkerMayRunAtMostStalenessStepsAheadOfTheSlowest) {
  SspGate g(3, 2);
  EXPECT_EQ(g.push(0), 0);  // clocks 1 0 0
  EXPECT_TRUE(g.may_proceed(0));
  EXPECT_EQ(g.push(0), 1);  // 2 0 0
  EXPECT_TRUE(g.may_proceed(0));
  EXPECT_EQ(g.push(0), 2);  // 3 0 0: step 3 would be 3 ahead
  EXPECT_FALSE(g.may_proceed(0));
  g.push(1);  // 3 1 0: worker 2 is still at 0
  EXPECT_FALSE(g.may_proceed(0));
  EXPECT_EQ(g.push(2), 0);  // 3 1 1
  EXPECT_TRUE(g.may_proceed(0));
  EXPECT_EQ(g.slowest(), 1);
}

TEST(SspGate, StalenessZeroIsLockstepAndUnboundedNeverHolds) {
  SspGate lock(2, 0);
  lock.push(0);
  EXPECT_FALSE(lock.may_proceed(0));
  lock.push(1);
  EXPECT_TRUE(lock.may_proceed(0));
  EXPECT_TRUE(lock.may_proceed(1));
  SspGate asp(2, SspGate::kUnbounded);
  for (int i = 0; i < 10; ++i) asp.push(0);
  EXPECT_TRUE(asp.may_proceed(0));
  EXPECT_THROW(SspGate(2, -2), InvalidArgument);
}

TEST(SspGate, AFinishedWorkerHoldsNoOneBack) {
  SspGate g(2, 1);
  g.push(0);
  g.push(0);
  EXPECT_FALSE(g.may_proceed(0));
  g.leave(1);
  EXPECT_TRUE(g.may_proceed(0));
  g.leave(0);
  EXPECT_EQ(g.slowest(), 2);  // nobody runs: the largest clock
}

TEST(Stragglers, TheWorkerWellAboveTheOthersMedianIsNamed) {
  using C = StepIntervals::Clock;
  StepIntervals s(3);
  const C::time_point t0 = C::now();
  for (int step = 0; step < 5; ++step) {
    for (int r = 0; r < 3; ++r) {
      const C::time_point a = t0 + std::chrono::seconds(step * 100);
      s.answered(r, a);
      s.pushed(r, a + std::chrono::milliseconds(r == 1 ? 40 : 10 + r));
    }
  }
  EXPECT_DOUBLE_EQ(s.median_s(1), 0.040);
  std::optional<Straggler> st = find_straggler(s);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->rank, 1);
  EXPECT_NEAR(st->others_median_s, 0.012, 1e-9);  // median of {0.010, 0.012}: the upper
  StepIntervals even(2);
  even.answered(0, t0);
  even.pushed(0, t0 + std::chrono::milliseconds(10));
  EXPECT_FALSE(find_straggler(even).has_value());  // worker 1 has no interval yet
  even.answered(1, t0);
  even.pushed(1, t0 + std::chrono::milliseconds(12));
  EXPECT_FALSE(find_straggler(even).has_value());  // 1.2x: not a straggler
}

TEST(Consistency, ModesParseAndABadOneNamesTheKey) {
  EXPECT_EQ(parse_mode("ssp"), Mode::kSsp);
  EXPECT_STREQ(mode_name(Mode::kAsp), "asp");
  try {
    parse_mode("async");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ps.mode"), std::string::npos);
  }
}

}  // namespace
}  // namespace cohort::ps
