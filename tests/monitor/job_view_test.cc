// JobView (what the dashboard knows of a job) and its Prometheus text, from records shaped
// like the trainer's.
#include "cohort/monitor/job_view.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cohort/monitor/prometheus.h"
#include "tests/monitor/prometheus_parse.h"

namespace {

using cohort::monitor::JobView;
using Json = nlohmann::json;

Json step_record(int rank, int64_t step, double sps, int64_t samples) {
  return Json{{"event", "step"},         {"rank", rank},       {"step", step},
              {"loss", 0.5 + rank},      {"lr", 0.05},         {"samples_per_s", sps},
              {"samples", samples},      {"steps", 10},        {"data_ms", 0.5},
              {"forward_ms", 1.0},       {"backward_ms", 2.0}, {"optimizer_ms", 0.5},
              {"exposed_comm_ms", 0.25}, {"comm_ms", 1.0},     {"bytes_sent", 1000},
              {"bytes_received", 900},   {"energy_j", 1.5}};
}

void fill_two_rank_job(JobView& v) {
  v.ingest(0, Json{{"event", "start"},
                   {"model", "mlp"},
                   {"total_steps", 100},
                   {"baseline_samples_per_s", 1000.0},
                   {"energy_source", "model"}});
  for (int rank = 0; rank < 2; ++rank) {
    v.ingest(rank, step_record(rank, 10, 900 + rank, 640));
    v.ingest(rank, step_record(rank, 20, 950 + rank, 1280));
  }
}

TEST(JobView, KeepsEachRanksLatestStepAndTotals) {
  JobView v({.workers = 2});
  fill_two_rank_job(v);
  Json s = v.snapshot();
  ASSERT_EQ(s["ranks"].size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const Json& r = s["ranks"][rank];
    EXPECT_EQ(r["rank"], rank);
    EXPECT_EQ(r["step"], 20);
    EXPECT_EQ(r["samples"], 1280);
    EXPECT_DOUBLE_EQ(r["samples_per_s"].get<double>(), 950 + rank);
    EXPECT_EQ(r["bytes_sent"], 2000);  // summed over step records
    EXPECT_DOUBLE_EQ(r["energy_j"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(r["breakdown"]["exposed_comm_ms"].get<double>(), 0.25);
  }
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 950 + 951);
  // Live efficiency against the recorded 1-worker baseline: 1901 / (2 * 1000).
  EXPECT_NEAR(s["scaling_efficiency"].get<double>(), 0.9505, 1e-12);
  EXPECT_EQ(s["loss"].size(), 2u);  // rank 0's curve
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["energy_source"], "model");
}

TEST(JobView, NamesTheStragglerAndRecordsEvents) {
  JobView v({.workers = 2});
  fill_two_rank_job(v);
  Json r = step_record(0, 30, 900, 1920);
  r["straggler"] = {{"rank", 1}, {"factor", 2.0}};
  v.ingest(0, r);
  v.ingest(0, Json{{"event", "checkpoint"}, {"step", 30}});
  v.event("restart", "rank 1 was killed by signal 9");
  Json s = v.snapshot();
  EXPECT_EQ(s["straggler"]["rank"], 1);
  EXPECT_EQ(s["straggler"]["step"], 30);
  EXPECT_FALSE(s["ranks"][0]["straggler"].get<bool>());
  EXPECT_TRUE(s["ranks"][1]["straggler"].get<bool>());
  ASSERT_EQ(s["events"].size(), 2u);
  EXPECT_EQ(s["events"][0]["kind"], "checkpoint");
  EXPECT_EQ(s["events"][1]["kind"], "restart");
  EXPECT_EQ(s["restarts"], 1);
}

TEST(JobView, CountsMalformedRecordsWithoutFailing) {
  JobView v({.workers = 1});
  v.ingest(0, Json(42));
  v.ingest(0, Json{{"no_event", 1}});
  v.ingest(0, Json{{"event", "step"}, {"step", "not a number"}});  // wrong type: skipped
  EXPECT_EQ(v.malformed(), 3u);
  EXPECT_EQ(v.snapshot()["ranks"].size(), 1u);
}

TEST(JobView, KeepsAtMostHistoryPoints) {
  JobView v({.workers = 1, .history = 5});
  for (int i = 1; i <= 20; ++i) v.ingest(0, step_record(0, i, 100, i * 64));
  Json s = v.snapshot();
  EXPECT_EQ(s["loss"].size(), 5u);
  EXPECT_EQ(s["loss"][0][0], 16);
  EXPECT_EQ(s["throughput"].size(), 5u);
}

TEST(Prometheus, TextParsesWithThePrometheusParserAndHoldsTheRecordsFigures) {
  JobView v({.workers = 2});
  fill_two_rank_job(v);
  const std::string text = cohort::monitor::prometheus_text(v);
  auto parsed = cohort::testing::parse_prometheus(text);
  ASSERT_EQ(parsed.status, 0) << parsed.output << "\n--- text ---\n" << text;
  const std::string& o = parsed.output;
  for (const char* want :
       {"cohort_samples_total{rank=0} 1280.0", "cohort_samples_total{rank=1} 1280.0",
        "cohort_bytes_sent_total{rank=1} 2000.0", "cohort_samples_per_second{rank=1} 951.0",
        "cohort_step_seconds_count{rank=0} 20.0", "cohort_step_seconds_bucket{le=+Inf,rank=0} 20.0",
        "cohort_step_seconds_bucket{le=0.0025,rank=0} 0.0",
        "cohort_step_seconds_bucket{le=0.005,rank=0} 20.0", "cohort_workers{} 2.0",
        "cohort_energy_joules_total{rank=0} 3.0"})
    EXPECT_NE(o.find(want), std::string::npos) << "missing '" << want << "' in\n" << o;
  // Step time 4 ms (data 0.5 + forward 1 + backward 2 + optimizer 0.5) over 20 steps.
  EXPECT_NE(o.find("cohort_step_seconds_sum{rank=0} 0.08"), std::string::npos) << o;
}

}  // namespace

namespace {

TEST(JobView, ADivergedLossDoesNotBreakTheStateOrMetrics) {
  JobView v({.workers = 1});
  Json r = step_record(0, 10, 900, 640);
  r["loss"] = nullptr;  // how nlohmann writes NaN
  v.ingest(0, r);
  Json s = v.snapshot();
  EXPECT_EQ(s["ranks"][0]["step"], 10);
  EXPECT_TRUE(std::isnan(s["ranks"][0]["loss"].get<double>()));  // null in /api/state
  auto parsed = cohort::testing::parse_prometheus(cohort::monitor::prometheus_text(v));
  ASSERT_EQ(parsed.status, 0) << parsed.output;
  EXPECT_NE(parsed.output.find("cohort_loss{rank=0} nan"), std::string::npos) << parsed.output;
}

TEST(JobView, TheSamplesCounterNeverGoesDownAcrossARestart) {
  JobView v({.workers = 1});
  v.ingest(0, step_record(0, 20, 900, 1280));
  v.ingest(0, step_record(0, 10, 900, 640));  // resumed from a checkpoint at step 10
  v.ingest(0, step_record(0, 20, 900, 1280));
  EXPECT_EQ(v.totals()[0].samples_counted, 1280 + 640);
  EXPECT_EQ(v.snapshot()["ranks"][0]["samples"], 1280);
}

}  // namespace
