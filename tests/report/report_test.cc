// `cohort report`'s figures: the JSON block embedded in the page, parsed back, must equal the
// fixture JSONL's figures (losses, accuracies, samples/s, per-rank breakdown, scaling
// efficiency and energy computed by hand here).
#include <gtest/gtest.h>

#include <fstream>

#include "cohort/report/html.h"
#include "cohort/report/report.h"
#include "tests/report/fixtures.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::json;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;

// Writes the report of `dirs` and returns the page's embedded data block.
json report_of(const std::vector<fs::path>& dirs, cohort::report::FigureOptions fo = {},
               std::string out = "") {
  cohort::report::ReportOptions o;
  for (const fs::path& d : dirs) o.run_dirs.push_back(d.string());
  o.output = out;
  o.figures = fo;
  cohort::report::ReportResult r = cohort::report::write_report(o);
  std::string html = read_bytes(r.output);
  EXPECT_NE(html.find("Chart.js v"), std::string::npos) << "Chart.js is inlined";
  EXPECT_EQ(html.find("<script src="), std::string::npos) << "nothing is loaded from outside";
  return cohort::report::embedded_data(html);
}

const json& run_named(const json& data, const std::string& name) {
  for (const json& r : data["runs"])
    if (r["name"] == name) return r;
  throw std::runtime_error("no run " + name);
}

TEST(Report, DefaultOutputIsInTheFirstRunDir) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  report_of({f.one, f.two});
  EXPECT_TRUE(fs::exists(f.one / "report.html"));
  EXPECT_FALSE(fs::exists(f.one / "report.html.tmp"));
}

TEST(Report, CurvesEqualTheJsonl) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json d = report_of({f.one, f.two}, {.target_accuracy = 0.7});
  EXPECT_EQ(d["format"], "cohort-report/1");
  EXPECT_EQ(d["layout"], "overlay");
  EXPECT_DOUBLE_EQ(d["target_accuracy"].get<double>(), 0.7);
  const json& one = run_named(d, "one");
  EXPECT_EQ(one["loss"]["step"], json({2, 4}));
  EXPECT_EQ(one["loss"]["loss"], json({2.0, 1.5}));
  EXPECT_EQ(one["eval"]["accuracy"], json({0.55, 0.72}));
  EXPECT_EQ(one["eval"]["train_s"], json({0.5, 1.0}));
  EXPECT_EQ(one["eval"]["energy_j"], json({nullptr, nullptr}));
  EXPECT_EQ(one["throughput"]["samples_per_s"], json({100.0, 110.0}));
  const json& two = run_named(d, "two");
  EXPECT_EQ(two["workers"], 2);
  EXPECT_EQ(two["strategy"], "ddp");
  EXPECT_EQ(two["loss"]["loss"], json({2.1, 1.4}));  // rank 0's
  EXPECT_EQ(two["eval"]["accuracy"], json({0.6, 0.75}));
  // Job-wide samples/s: the sum of both ranks' figures at each step.
  EXPECT_EQ(two["throughput"]["samples_per_s"], json({95.0 + 93.0, 96.0 + 94.0}));
}

TEST(Report, BreakdownAndCommunicationEqualTheSummaries) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json d = report_of({f.one, f.two});
  const json& b = run_named(d, "two")["breakdown"];
  ASSERT_EQ(b.size(), 2u);
  // Rank 1's summary: base 1.5 ms, comm 5, exposed 2 (fixtures.h summary_record).
  EXPECT_EQ(b[1]["rank"], 1);
  EXPECT_DOUBLE_EQ(b[1]["data_ms"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(b[1]["forward_ms"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(b[1]["backward_ms"].get<double>(), 4.5 + 2.0);
  EXPECT_DOUBLE_EQ(b[1]["backward_compute_ms"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(b[1]["exposed_comm_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(b[1]["step_ms"].get<double>(), 1.5 + 3.0 + 6.5 + 0.5);
  EXPECT_DOUBLE_EQ(b[0]["step_ms"].get<double>(), 1.0 + 2.0 + 4.0 + 0.5);
  const json& m = run_named(d, "two")["comm"]["mean"];
  EXPECT_DOUBLE_EQ(m["comm_ms"].get<double>(), (4.0 + 5.0) / 2);
  EXPECT_DOUBLE_EQ(m["exposed_ms"].get<double>(), (1.0 + 2.0) / 2);
  EXPECT_DOUBLE_EQ(m["hidden_share"].get<double>(), 1 - 1.5 / 4.5);
  EXPECT_TRUE(run_named(d, "one")["comm"]["mean"]["hidden_share"].is_null());
  EXPECT_EQ(run_named(d, "two")["comm"]["exposed_ms"], json({1.0, 1.0}));
}

TEST(Report, ScalingEfficiencyAgainstTheOneWorkerRun) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json d = report_of({f.one, f.two});
  const json& rows = d["scaling"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0]["efficiency"].get<double>(), 1.0);
  EXPECT_EQ(rows[1]["baseline"], "one");
  EXPECT_DOUBLE_EQ(rows[1]["efficiency"].get<double>(), 190.0 / (2 * 110.0));
}

TEST(Report, NoOneWorkerRunIsSaidNotComputed) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json d = report_of({f.two});
  const json& row = d["scaling"]["rows"][0];
  EXPECT_TRUE(row["efficiency"].is_null());
  EXPECT_NE(row["note"].get<std::string>().find("no 1-worker run"), std::string::npos);
}

TEST(Report, EnergyShownWhereRecordedAndLabelledAnEstimate) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json d = report_of({f.one, f.two}, {.target_accuracy = 0.7});
  const json& e = run_named(d, "two")["energy"];
  EXPECT_TRUE(e["recorded"].get<bool>());
  EXPECT_DOUBLE_EQ(e["energy_j"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(e["energy_per_sample_j"].get<double>(), 0.0125);
  EXPECT_DOUBLE_EQ(e["comm_share"].get<double>(), 0.2);
  EXPECT_TRUE(e["estimate"].get<bool>());
  EXPECT_DOUBLE_EQ(e["to_target_j"].get<double>(), 41.0);  // the first eval at >= 0.7
  EXPECT_DOUBLE_EQ(run_named(d, "two")["summary"]["time_to_target_s"].get<double>(), 0.6);
  const json& none = run_named(d, "one")["energy"];
  EXPECT_FALSE(none["recorded"].get<bool>());
  EXPECT_TRUE(none["energy_j"].is_null());
  EXPECT_EQ(none["to_target_note"], "not recorded");
}

TEST(Report, SummaryTable) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  json s = run_named(report_of({f.one, f.two}), "two")["summary"];
  EXPECT_EQ(s["workers"], 2);
  EXPECT_EQ(s["strategy"], "ddp");
  EXPECT_DOUBLE_EQ(s["final_accuracy"].get<double>(), 0.72);
  EXPECT_DOUBLE_EQ(s["wall_seconds"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(s["samples_per_s"].get<double>(), 190.0);
  EXPECT_FALSE(s["running"].get<bool>());
}

TEST(Report, RunningJobUsesItsStepRecords) {
  TempDir t;
  fs::path d = fs::path(t.path()) / "running";
  fs::create_directories(d);
  // Two intervals of 2 steps each; the second with more data time. No summary yet.
  cohort::testing::write_jsonl(
      d / "metrics.jsonl",
      {cohort::testing::start_record(0, 1), cohort::testing::step_record(0, 2, 2.0, 100, 1.0, 0, 0),
       cohort::testing::step_record(0, 4, 1.8, 120, 3.0, 0, 0)});
  json r = report_of({d})["runs"][0];
  EXPECT_TRUE(r["summary"]["running"].get<bool>());
  EXPECT_DOUBLE_EQ(r["summary"]["samples_per_s"].get<double>(), 120.0);
  EXPECT_DOUBLE_EQ(r["breakdown"][0]["data_ms"].get<double>(), (2 * 1.0 + 2 * 3.0) / 4);
  EXPECT_EQ(r["energy"]["recorded"], false);
}

TEST(Report, ParameterServerSummaries) {
  TempDir t;
  fs::path d = fs::path(t.path()) / "ps";
  fs::create_directories(d);
  cohort::testing::write_jsonl(d / "metrics.jsonl", {cohort::testing::start_record(0, 2)});
  json summary{{"event", "server_summary"},
               {"server", 1},
               {"updates", 40},
               {"pushes", 80},
               {"updates_per_s", 20.5},
               {"dropped_pushes", 3},
               {"staleness_mean", 0.5},
               {"staleness_max", 2},
               {"bytes_in", 1000},
               {"bytes_out", 2000}};
  cohort::testing::write_jsonl(d / "metrics.server1.jsonl",
                               {{{"event", "server_interval"}, {"server", 1}}, summary});
  json s = report_of({d})["runs"][0]["servers"];
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["server"], 1);
  for (const char* k : {"updates_per_s", "pushes", "dropped_pushes", "staleness_mean",
                        "staleness_max", "bytes_in", "bytes_out"})
    EXPECT_EQ(s[0][k], summary[k]) << k;
}

TEST(Report, CompareLayoutAndOutputPath) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  std::string out = t.file("side_by_side.html");
  json d = report_of({f.one, f.two}, {.layout = cohort::report::Layout::kCompare}, out);
  EXPECT_EQ(d["layout"], "compare");
  EXPECT_EQ(d["runs"].size(), 2u);
}

}  // namespace
