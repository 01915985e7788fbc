// `cohort dashboard RUN_DIR...`'s runs: a run directory read back (as `cohort report` reads it)
// and replayed gives the view the live dashboard had of the same records; several runs list the
// config keys that differ; a directory that is missing or holds no metrics is an error naming it.
#include "tools/cohort/past_runs.h"

#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "tests/report/fixtures.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace {

namespace fs = std::filesystem;
using cohort::cli::load_past_runs;
using cohort::monitor::JobView;
using cohort::testing::json;

json at(json record, double time_s) {
  record["time_s"] = time_s;
  return record;
}

// A 2-worker run, each record with the rank it came from, in the order the ranks' streams
// would have delivered them live (by time); rank 0 evaluates and checkpoints.
std::vector<std::pair<int, json>> two_worker_records() {
  using namespace cohort::testing;
  json s0 = summary_record(0, 2, 190, 1.0, 4.0, 1.0), s1 = summary_record(1, 2, 190, 1.5, 5, 2);
  return {{0, start_record(0, 2)},
          {1, start_record(1, 2)},
          {0, at(step_record(0, 2, 2.1, 95, 1.0, 4.0, 1.0), 1.0)},
          {1, at(step_record(1, 2, 2.2, 93, 1.5, 5.0, 2.0), 1.1)},
          {0, eval_record(2, 1.7, 0.6, 0.2)},  // time_s 1.2
          {0, json{{"event", "checkpoint"}, {"step", 2}, {"dir", "x/checkpoints"}}},
          {0, at(step_record(0, 4, 1.4, 96, 1.0, 4.0, 1.0), 2.0)},
          {1, at(step_record(1, 4, 1.6, 94, 1.5, 5.0, 2.0), 2.1)},
          {0, eval_record(4, 1.1, 0.75, 1.2)},  // time_s 2.2
          {0, s0},
          {1, s1}};
}

void write_run(const fs::path& dir, const std::vector<std::pair<int, json>>& records,
               const std::string& config = "[parallel]\nstrategy = \"ddp\"\n") {
  std::map<int, std::vector<json>> files;
  for (const auto& [rank, r] : records) files[rank].push_back(r);
  fs::create_directories(dir);
  for (const auto& [rank, rs] : files)
    cohort::testing::write_jsonl(
        dir / (rank == 0 ? "metrics.jsonl" : "metrics.rank" + std::to_string(rank) + ".jsonl"), rs);
  cohort::testing::write_bytes(dir / "config.toml", config);
}

// Everything but the clock: live it is when records arrived, read back the records' own times.
json without_clock(json s) {
  s.erase("elapsed_s");
  for (json& p : s["throughput"]) p[0] = 0;
  for (json& e : s["events"]) e.erase("time_s");
  return s;
}

TEST(PastRuns, ARunReadBackIsTheViewTheLiveDashboardHadOfIt) {
  cohort::testing::TempDir tmp;
  write_run(fs::path(tmp.path()) / "two", two_worker_records());
  JobView live({.workers = 2});
  for (const auto& [rank, r] : two_worker_records()) live.ingest(rank, r);
  live.event("finished", "all workers finished");  // the launcher, at the end
  auto runs = load_past_runs({(fs::path(tmp.path()) / "two").string()});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].name, "two");
  EXPECT_EQ(runs[0].info["strategy"], "ddp");
  const json read = runs[0].view->snapshot(), seen = live.snapshot();
  EXPECT_EQ(without_clock(read), without_clock(seen)) << read.dump(1) << "\n" << seen.dump(1);
  EXPECT_EQ(read["state"], "finished");
  EXPECT_EQ(read["loss"], json::parse("[[2, 2.1], [4, 1.4]]"));
  EXPECT_EQ(read["evals"].size(), 2u);
  EXPECT_EQ(read["ranks"][1]["step"], 4);
  EXPECT_DOUBLE_EQ(read["elapsed_s"].get<double>(), 5.0);  // the summaries' wall_seconds
}

TEST(PastRuns, SeveralRunsListTheConfigKeysThatDiffer) {
  cohort::testing::TempDir tmp;
  write_run(fs::path(tmp.path()) / "a", two_worker_records(),
            "[optim]\nlr = 0.05\n[run]\nname = \"a\"\n");
  write_run(fs::path(tmp.path()) / "b", two_worker_records(),
            "[optim]\nlr = 0.1\n[run]\nname = \"b\"\n");
  auto runs = load_past_runs(
      {(fs::path(tmp.path()) / "a").string(), (fs::path(tmp.path()) / "b").string()});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].info["config"], json({{"optim.lr", "0.05"}}));
  EXPECT_EQ(runs[1].info["config"], json({{"optim.lr", "0.1"}}));
  const json state = cohort::monitor::runs_state(runs);
  EXPECT_EQ(state["runs"][1]["name"], "b");
  EXPECT_EQ(state["runs"][1]["state"]["loss"], state["runs"][0]["state"]["loss"]);
}

TEST(PastRuns, RunsOfTheSameNameAreToldApartByTheirDirectories) {
  cohort::testing::TempDir tmp;
  const fs::path a = fs::path(tmp.path()) / "x" / "train", b = fs::path(tmp.path()) / "y" / "train";
  write_run(a, two_worker_records());
  write_run(b, two_worker_records());
  auto runs = load_past_runs({a.string(), b.string(), a.string()});
  EXPECT_EQ(runs[0].name, a.string());
  EXPECT_EQ(runs[1].name, b.string());
  EXPECT_EQ(runs[2].name, a.string() + " (2)");
}

TEST(PastRuns, ADirectoryMissingOrWithoutMetricsIsAnErrorNamingIt) {
  using cohort::InvalidArgument;
  using cohort::testing::error_of;
  cohort::testing::TempDir tmp;
  write_run(fs::path(tmp.path()) / "good", two_worker_records());
  const std::string good = (fs::path(tmp.path()) / "good").string(),
                    missing = (fs::path(tmp.path()) / "missing").string();
  EXPECT_NE(error_of<InvalidArgument>([&] {
              load_past_runs({good, missing});
            }).find(missing),
            std::string::npos);
  fs::create_directories(fs::path(tmp.path()) / "empty");
  const std::string empty = (fs::path(tmp.path()) / "empty").string();
  std::string e = error_of<InvalidArgument>([&] { load_past_runs({empty}); });
  EXPECT_NE(e.find("'" + empty + "' has no metrics.jsonl"), std::string::npos) << e;
  cohort::testing::write_bytes(fs::path(tmp.path()) / "empty" / "metrics.jsonl", "");
  e = error_of<InvalidArgument>([&] { load_past_runs({empty}); });
  EXPECT_NE(e.find("'" + empty + "' holds no metrics"), std::string::npos) << e;
  EXPECT_THROW(load_past_runs({}), InvalidArgument);
}

TEST(PastRuns, ARunThatStoppedEarlyIsShownAsIncomplete) {
  cohort::testing::TempDir tmp;
  auto records = two_worker_records();
  records.pop_back();  // rank 1's summary
  write_run(fs::path(tmp.path()) / "cut", records);
  auto runs = load_past_runs({(fs::path(tmp.path()) / "cut").string()});
  EXPECT_EQ(runs[0].view->snapshot()["state"], "incomplete");
}

}  // namespace
