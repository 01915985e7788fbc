// Replay: a run's records read back from its files give the view the live dashboard had of it.
// The ranks' files are merged by the records' own times, each file's order kept, and the view's
// clock is the records'.
#include "cohort/monitor/replay.h"

#include <gtest/gtest.h>

namespace {

using cohort::monitor::JobView;
using cohort::monitor::RecordedRun;
using Json = nlohmann::json;

Json step_at(int rank, int64_t step, double time_s, double sps) {
  return Json{{"event", "step"},      {"rank", rank},         {"step", step}, {"loss", 1.0 / step},
              {"samples_per_s", sps}, {"samples", step * 32}, {"steps", 5},   {"forward_ms", 2.0},
              {"bytes_sent", 100},    {"time_s", time_s}};
}

Json start(int rank) {
  return Json{
      {"event", "start"}, {"rank", rank}, {"model", "mlp"}, {"total_steps", 10}, {"workers", 2}};
}

Json summary(int rank, double wall_s) {
  return Json{
      {"event", "summary"}, {"rank", rank}, {"samples_per_s", 99.0}, {"wall_seconds", wall_s}};
}

// Two ranks; rank 0 also evaluates and checkpoints (no time: it stays after its step).
RecordedRun two_rank_run() {
  RecordedRun run;
  run.ranks[0] = {start(0),
                  step_at(0, 5, 1.0, 100),
                  Json{{"event", "eval"}, {"step", 5}, {"accuracy", 0.5}, {"time_s", 1.5}},
                  Json{{"event", "checkpoint"}, {"step", 5}},
                  step_at(0, 10, 3.0, 110),
                  summary(0, 4.0)};
  run.ranks[1] = {start(1), step_at(1, 5, 2.0, 90), step_at(1, 10, 3.0, 95), summary(1, 4.0)};
  return run;
}

// "rank:event@time" for each merged record.
std::vector<std::string> order_of(const RecordedRun& run) {
  std::vector<std::string> out;
  for (const auto& r : cohort::monitor::merged_records(run))
    out.push_back(std::to_string(r.rank) + ":" + (*r.record)["event"].get<std::string>() + "@" +
                  std::to_string(int(r.time_s * 10)));
  return out;
}

TEST(Replay, MergesTheRanksFilesByTimeKeepingEachFilesOrder) {
  EXPECT_EQ(order_of(two_rank_run()),
            (std::vector<std::string>{"0:start@0", "1:start@0", "0:step@10", "0:eval@15",
                                      "0:checkpoint@15", "1:step@20", "0:step@30", "1:step@30",
                                      "0:summary@40", "1:summary@40"}));
}

TEST(Replay, AResumedRunsClockNeverGoesBack) {
  RecordedRun run;
  run.ranks[0] = {start(0), step_at(0, 5, 5.0, 1), summary(0, 6.0), start(0),
                  step_at(0, 10, 1.0, 1)};
  EXPECT_EQ(order_of(run), (std::vector<std::string>{"0:start@0", "0:step@50", "0:summary@60",
                                                     "0:start@60", "0:step@70"}));
}

// What does not depend on when the records arrived: everything but the clock's fields.
Json without_clock(Json s) {
  s.erase("elapsed_s");
  for (Json& p : s["throughput"]) p[0] = 0;
  for (Json& e : s["events"]) e.erase("time_s");
  return s;
}

TEST(Replay, GivesTheViewTheLiveDashboardHadOfTheSameRecords) {
  const RecordedRun run = two_rank_run();
  JobView live({.workers = 2});
  for (const auto& r : cohort::monitor::merged_records(run)) live.ingest(r.rank, *r.record);
  live.event("finished", "all workers finished");  // what the launcher adds at the end
  auto replayed = cohort::monitor::replay(run, {.workers = 2});
  const Json a = replayed->snapshot(), b = live.snapshot();
  EXPECT_EQ(without_clock(a), without_clock(b)) << a.dump(1) << "\n" << b.dump(1);
  EXPECT_EQ(a["state"], "finished");
  EXPECT_EQ(a["loss"], Json::parse("[[5, 0.2], [10, 0.1]]"));
  // At rank 0's step 10 rank 1's step 10 (the same time, a higher rank) is not in yet: 110 + 90.
  EXPECT_EQ(a["step_throughput"], Json::parse("[[5, 100.0], [10, 200.0]]"));
  EXPECT_EQ(a["events"][0]["kind"], "checkpoint");
  // The run's clock: the records' times, not the moment they were read.
  EXPECT_DOUBLE_EQ(a["elapsed_s"].get<double>(), 4.0);
  EXPECT_EQ(a["throughput"],
            Json::parse("[[1.0, 100.0], [2.0, 190.0], [3.0, 200.0], [3.0, 205.0]]"));
  EXPECT_DOUBLE_EQ(a["events"][0]["time_s"].get<double>(), 1.5);
}

TEST(Replay, ARunWithoutEveryRanksSummaryIsIncomplete) {
  RecordedRun run = two_rank_run();
  run.ranks[1].pop_back();
  Json s = cohort::monitor::replay(run, {.workers = 2})->snapshot();
  EXPECT_EQ(s["state"], "incomplete");
  EXPECT_NE(s["events"].back()["text"].get<std::string>().find("rank(s) 1"), std::string::npos)
      << s["events"].dump();
  // A rank that wrote nothing at all counts as one without a summary.
  RecordedRun one;
  one.ranks[0] = two_rank_run().ranks[0];
  EXPECT_EQ(cohort::monitor::replay(one, {.workers = 2})->snapshot()["state"], "incomplete");
  EXPECT_EQ(cohort::monitor::replay(one, {.workers = 1})->snapshot()["state"], "finished");
}

}  // namespace
