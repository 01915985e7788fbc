// Bad input to `cohort report`: each error names the file (and the line) to look at; a
// truncated last line (a job still writing) is skipped with a warning.
#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "cohort/report/html.h"
#include "cohort/report/report.h"
#include "cohort/report/run_data.h"
#include "tests/report/fixtures.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;

// The message of the InvalidArgument that reading `dir` throws ("" if none).
std::string read_error(const fs::path& dir) {
  try {
    cohort::report::read_run(dir.string());
  } catch (const cohort::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ReportErrors, MissingDirectory) {
  TempDir t;
  std::string msg = read_error(t.file("nope"));
  EXPECT_TRUE(has(msg, t.file("nope"))) << msg;
  EXPECT_TRUE(has(msg, "does not exist")) << msg;
}

TEST(ReportErrors, DirectoryWithoutMetrics) {
  TempDir t;
  std::string msg = read_error(t.path());
  EXPECT_TRUE(has(msg, "no metrics.jsonl")) << msg;
  EXPECT_TRUE(has(msg, t.path())) << msg;
}

TEST(ReportErrors, MalformedLineNamesFileAndLine) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  fs::path m = f.two / "metrics.rank1.jsonl";
  std::string text = read_bytes(m);
  size_t second = text.find('\n') + 1;
  write_bytes(m, text.substr(0, second) + "{\"event\": \"step\", oops}\n" + text.substr(second));
  std::string msg = read_error(f.two);
  EXPECT_TRUE(has(msg, m.string() + ":2:")) << msg;
  EXPECT_TRUE(has(msg, "not valid JSON")) << msg;
}

TEST(ReportErrors, LineThatIsNotAnObject) {
  TempDir t;
  write_bytes(t.file("metrics.jsonl"), "{\"event\": \"start\"}\n[1, 2]\n{}\n");
  std::string msg = read_error(t.path());
  EXPECT_TRUE(has(msg, "metrics.jsonl:2: not a JSON object")) << msg;
}

TEST(ReportErrors, TruncatedLastLineIsSkippedWithAWarning) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  fs::path m = f.one / "metrics.jsonl";
  std::string text = read_bytes(m);
  write_bytes(m, text + "{\"event\": \"step\", \"step\": 6, \"lo");  // no newline: mid-write
  cohort::report::RunData r = cohort::report::read_run(f.one.string());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(has(r.warnings[0], m.string() + ":7: skipped a truncated last line"))
      << r.warnings[0];
  EXPECT_EQ(r.chief().steps.size(), 2u);
  // The page says so too.
  cohort::report::ReportOptions o{.run_dirs = {f.one.string()}};
  cohort::report::ReportResult res = cohort::report::write_report(o);
  EXPECT_EQ(res.warnings, r.warnings);
  auto data = cohort::report::embedded_data(read_bytes(res.output));
  EXPECT_EQ(data["runs"][0]["warnings"].size(), 1u);
}

TEST(ReportErrors, MalformedLineWithItsNewlineIsAnError) {
  TempDir t;
  write_bytes(t.file("metrics.jsonl"), "{\"event\": \"start\"}\n{\"event\": \"st\n");
  EXPECT_TRUE(has(read_error(t.path()), "metrics.jsonl:2:"));
}

TEST(ReportErrors, MissingChartJsNamesThePathAndThePackage) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  cohort::report::ReportOptions o{.run_dirs = {f.one.string()},
                                  .chartjs_path = t.file("chart.min.js")};
  try {
    cohort::report::write_report(o);
    FAIL() << "no error";
  } catch (const cohort::IoError& e) {
    EXPECT_TRUE(has(e.what(), t.file("chart.min.js"))) << e.what();
    EXPECT_TRUE(has(e.what(), "libjs-chart.js")) << e.what();
  }
}

TEST(ReportErrors, RunNamesCannotCloseTheDataScript) {
  TempDir t;
  fs::path d = fs::path(t.path()) / "run<!--<script>";
  fs::create_directories(d);
  cohort::testing::write_jsonl(d / "metrics.jsonl", {cohort::testing::start_record(0, 1)});
  cohort::report::ReportOptions o{.run_dirs = {d.string()}, .output = t.file("r.html")};
  std::string html = read_bytes(cohort::report::write_report(o).output);
  EXPECT_EQ(cohort::report::embedded_data(html)["runs"][0]["name"], "run<!--<script>");
}

}  // namespace
