// ServerMetrics (ps/server_metrics.h) alone: totals over the run, intervals every N updates
// with their own counters, and the records' fields.
#include <gtest/gtest.h>

#include "cohort/ps/server_metrics.h"

namespace cohort::ps {
namespace {

using Clock = ServerMetrics::Clock;
using namespace std::chrono_literals;

TEST(PsServerMetrics, CountsBytesAndQueueDepthAndGivesAnIntervalEveryNUpdates) {
  ServerMetrics m(2);
  const Clock::time_point t0 = Clock::now();
  m.received(100);
  EXPECT_FALSE(m.pushed(1, 0, t0));  // BSP: the first push of a step waits
  m.received(100);
  m.sent(50);
  m.sent(50);
  EXPECT_FALSE(m.pushed(0, 1, t0 + 1s));  // applied: both answered
  m.received(100);
  EXPECT_FALSE(m.pushed(1, 1, t0 + 2s));
  m.received(100);
  m.sent(60);
  std::optional<ServerInterval> i = m.pushed(0, 2, t0 + 4s);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->updates, 2);
  EXPECT_EQ(i->interval_updates, 2);
  EXPECT_DOUBLE_EQ(i->seconds, 4.0);
  EXPECT_DOUBLE_EQ(i->updates_per_s(), 0.5);
  EXPECT_EQ(i->traffic.bytes_in, 400u);
  EXPECT_EQ(i->traffic.bytes_out, 160u);
  EXPECT_EQ(i->traffic.queue_depth_max, 1);
  EXPECT_DOUBLE_EQ(i->traffic.queue_depth_mean(), 0.5);

  // The next interval starts from zero; the totals go on.
  m.received(10);
  EXPECT_FALSE(m.pushed(3, 3, t0 + 5s));
  i = m.pushed(0, 4, t0 + 6s);
  ASSERT_TRUE(i);
  EXPECT_EQ(i->interval_updates, 2);
  EXPECT_DOUBLE_EQ(i->seconds, 2.0);
  EXPECT_EQ(i->traffic.bytes_in, 10u);
  EXPECT_EQ(i->traffic.queue_depth_max, 3);
  EXPECT_EQ(m.total().bytes_in, 410u);
  EXPECT_EQ(m.total().bytes_out, 160u);
  EXPECT_EQ(m.total().queue_depth_max, 3);
  EXPECT_DOUBLE_EQ(m.total().queue_depth_mean(), 5.0 / 6.0);

  nlohmann::json r = interval_record(1, *i);
  EXPECT_EQ(r["event"], "server_interval");
  EXPECT_EQ(r["server"], 1);
  EXPECT_EQ(r["updates"], 4);
  EXPECT_EQ(r["bytes_in"], 10);
  EXPECT_EQ(r["queue_depth_max"], 3);
  EXPECT_DOUBLE_EQ(r["updates_per_s"].get<double>(), 1.0);
}

TEST(PsServerMetrics, NoIntervalsWhenEveryIsZero) {
  ServerMetrics m(0);
  for (int u = 1; u <= 10; ++u) EXPECT_FALSE(m.pushed(0, u, Clock::now()));
  EXPECT_EQ(m.total().samples, 10);
}

}  // namespace
}  // namespace cohort::ps
