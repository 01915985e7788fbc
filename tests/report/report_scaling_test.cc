// `cohort report`'s scaling table compares like with like: a 1-worker baseline with the same
// threads per worker where there is one; otherwise a warning that names both runs and their
// threads and cores, and the per-core efficiency beside the per-worker one.
#include <gtest/gtest.h>

#include <sstream>

#include "cohort/report/html.h"
#include "cohort/report/report.h"
#include "tests/report/fixtures.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::json;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_jsonl;

struct Report {
  json data;                          // the page's embedded block
  std::vector<std::string> warnings;  // what `cohort report` prints to stderr
};

Report report_of(const std::vector<fs::path>& dirs) {
  cohort::report::ReportOptions o;
  for (const fs::path& d : dirs) o.run_dirs.push_back(d.string());
  cohort::report::ReportResult r = cohort::report::write_report(o);
  return {cohort::report::embedded_data(read_bytes(r.output)), r.warnings};
}

// Sets the threads per worker that the start records of `dir`'s metrics files carry.
void set_threads(const fs::path& dir, int threads) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jsonl") continue;
    std::vector<json> records;
    std::istringstream in(read_bytes(e.path()));
    for (std::string line; std::getline(in, line);) {
      json j = json::parse(line);
      if (j["event"] == "start") j["threads"] = threads;
      records.push_back(j);
    }
    write_jsonl(e.path(), records);
  }
}

// A copy of the fixture's 1-worker run under another name, with `threads` and samples/s `sps`.
fs::path one_worker_run(const fs::path& from, const fs::path& to, int threads, double sps) {
  fs::copy(from, to, fs::copy_options::recursive);
  std::vector<json> records;
  std::istringstream in(read_bytes(to / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j["event"] == "summary") j["samples_per_s"] = sps;
    records.push_back(j);
  }
  write_jsonl(to / "metrics.jsonl", records);
  set_threads(to, threads);
  return to;
}

// The case: the 1-worker run took both cores with 2 threads, the 2-worker run 1 each.
TEST(ReportScaling, ThreadsPerWorkerThatDifferAreWarnedNamingRunsAndThreads) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  set_threads(f.one, 2);
  Report r = report_of({f.one, f.two});
  const json& row = r.data["scaling"]["rows"][1];
  EXPECT_EQ(row["baseline"], "one");
  EXPECT_EQ(row["threads"], 1);
  EXPECT_EQ(row["cores"], 2);
  EXPECT_EQ(row["baseline_threads"], 2);
  EXPECT_DOUBLE_EQ(row["efficiency"].get<double>(), 190.0 / (2 * 110.0));
  EXPECT_DOUBLE_EQ(row["efficiency_per_core"].get<double>(), (190.0 / 2) / (110.0 / 2));
  EXPECT_NE(row["note"].get<std::string>().find("threads per worker differ (1 vs 2)"),
            std::string::npos)
      << row["note"];
  ASSERT_EQ(r.warnings.size(), 1u);
  const std::string& w = r.warnings[0];
  for (const char* part : {"run 'two' (2 workers x 1 thread = 2 cores)",
                           "1-worker run 'one' (1 worker x 2 threads = 2 cores)",
                           "efficiency of 86%", "per core it is 173%", "run.threads"})
    EXPECT_NE(w.find(part), std::string::npos) << "missing '" << part << "' in: " << w;
  EXPECT_EQ(r.data["scaling"]["warnings"], json({w})) << "the page shows it too";
}

// Where a 1-worker run with the same threads per worker is among the runs, it is the baseline
// (whatever the order), and nothing is warned.
TEST(ReportScaling, TheOneWorkerRunWithTheSameThreadsIsTheBaseline) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  fs::path two_threads = one_worker_run(f.one, fs::path(t.path()) / "one_t2", 2, 180);
  Report r = report_of({two_threads, f.one, f.two});
  const json& rows = r.data["scaling"]["rows"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2]["baseline"], "one");
  EXPECT_DOUBLE_EQ(rows[2]["efficiency"].get<double>(), 190.0 / (2 * 110.0));
  EXPECT_DOUBLE_EQ(rows[2]["efficiency_per_core"].get<double>(), rows[2]["efficiency"]);
  EXPECT_EQ(rows[2]["note"], "");
  EXPECT_EQ(rows[0]["baseline"], "one_t2") << "a 1-worker run is its own baseline";
  EXPECT_DOUBLE_EQ(rows[0]["efficiency"].get<double>(), 1.0);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

// Runs written before the start record carried "threads": compared, but said to be unchecked.
TEST(ReportScaling, UnrecordedThreadsAreSaid) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  for (const fs::path& d : {f.one, f.two}) {
    for (const char* file : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
      if (!fs::exists(d / file)) continue;
      std::vector<json> records;
      std::istringstream in(read_bytes(d / file));
      for (std::string line; std::getline(in, line);) {
        json j = json::parse(line);
        j.erase("threads");
        records.push_back(j);
      }
      write_jsonl(d / file, records);
    }
  }
  Report r = report_of({f.one, f.two});
  const json& row = r.data["scaling"]["rows"][1];
  EXPECT_TRUE(row["threads"].is_null());
  EXPECT_TRUE(row["efficiency_per_core"].is_null());
  EXPECT_DOUBLE_EQ(row["efficiency"].get<double>(), 190.0 / (2 * 110.0));
  EXPECT_NE(row["note"].get<std::string>().find("threads per worker not recorded"),
            std::string::npos);
}

}  // namespace
