// The adaptive spin budget of transport waits (cohort/comm/transport/backoff.h).
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <memory>
#include <thread>

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

// A rank pinned to a core no other local rank is pinned to polls long and without adapting
// (taking its one-CPU mask for "more ranks than cores" made it yield on every wait, and beside
// a busy process each yield cost a scheduler slice). Ranks that merely share a one-CPU mask
// must not spin: there the peer needs the very CPU. Unpinned, the usual adaptive budget.
TEST(BackoffPolicy, OnlyARankAloneOnItsPinnedCorePollsLong) {
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto unpinned = Backoff::policy_for(2);
  EXPECT_TRUE(unpinned.adaptive);
  EXPECT_EQ(unpinned.spin, std::chrono::microseconds(100));
  EXPECT_EQ(Backoff::policy_for(CPU_COUNT(&all) + 1).spin, std::chrono::nanoseconds(0));
  EXPECT_EQ(pinned_cpu(), -1);
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  int cpu = pinned_cpu();
  auto alone = Backoff::policy_for(2, /*own_core=*/true);
  auto shared = Backoff::policy_for(2, /*own_core=*/false);
  sched_setaffinity(0, sizeof(all), &all);  // restore before any assertion can return
  EXPECT_EQ(cpu, first);
  EXPECT_FALSE(alone.adaptive);
  EXPECT_EQ(alone.spin, std::chrono::milliseconds(5));
  EXPECT_EQ(shared.spin, std::chrono::nanoseconds(0));  // two ranks, one CPU: yield at once
  AdaptiveSpin spin;
  spin.reset(alone.spin, alone.adaptive);
  spin.update(/*paused=*/true, /*gave_up_spinning=*/true);
  EXPECT_EQ(spin.now(), std::chrono::milliseconds(5));  // no halving
}

// A thread that starts waiting on a background operation's result rings the transport's
// notifier: the worker sleeping between polls (here, a thread in wait_until with a far
// deadline) wakes at once and, seeing a waiter, polls hard from then on.
TEST(WaitHint, ANewWaiterWakesTheSleepingWorker) {
  auto hint = std::make_shared<WaitHint>();
  hint->wake = std::make_shared<Notifier>();
  hint->background = true;
  EXPECT_TRUE(hint->sleep_between_polls());
  uint64_t seen = hint->wake->generation();
  std::atomic<bool> woke{false};
  std::thread worker([&] {
    hint->wake->wait_until(seen, std::chrono::steady_clock::now() + std::chrono::minutes(5));
    woke = true;
  });
  hint->add_waiter();
  worker.join();  // would block for five minutes without the ring
  EXPECT_TRUE(woke);
  EXPECT_FALSE(hint->sleep_between_polls());
  hint->remove_waiter();
  EXPECT_TRUE(hint->sleep_between_polls());
}

}  // namespace
}  // namespace cohort::comm::transport
