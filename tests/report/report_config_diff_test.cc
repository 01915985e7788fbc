// `cohort report A B`: what differs between the runs' recorded configs (config.toml), as text
// (printed by the CLI) and in the page's data block (its "Configuration" table).
#include <gtest/gtest.h>

#include "cohort/report/config_diff.h"
#include "cohort/report/html.h"
#include "cohort/report/report.h"
#include "tests/report/fixtures.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::json;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;

cohort::report::ReportResult report(const std::vector<fs::path>& dirs) {
  cohort::report::ReportOptions o;
  for (const fs::path& d : dirs) o.run_dirs.push_back(d.string());
  return cohort::report::write_report(o);
}

TEST(ReportConfigDiff, KeysThatDifferOrAreUnsetAreListedTheSameOnesAreNot) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  write_bytes(f.one / "config.toml",
              "[model]\ntype = \"mlp\"\nhidden = [512, 256]\n\n[optim]\nlr = 0.05\n");
  write_bytes(f.two / "config.toml",
              "[model]\ntype = \"mlp\"\nhidden = [512, 256]\n\n[optim]\nlr = 0.1\n\n[train]\n"
              "epochs = 2\n");
  auto r = report({f.one, f.two});
  const std::string a = f.one.filename().string(), b = f.two.filename().string();
  EXPECT_NE(r.config_diff.find("config: 2 key(s) differ (" + a + " | " + b + ")"),
            std::string::npos)
      << r.config_diff;
  EXPECT_NE(r.config_diff.find("  optim.lr: 0.05 | 0.1\n"), std::string::npos) << r.config_diff;
  EXPECT_NE(r.config_diff.find("  train.epochs: (unset) | 2\n"), std::string::npos)
      << r.config_diff;
  EXPECT_EQ(r.config_diff.find("model."), std::string::npos) << r.config_diff;
  json data = cohort::report::embedded_data(read_bytes(r.output));
  ASSERT_EQ(data["config_diff"]["rows"].size(), 2u) << data["config_diff"].dump();
  EXPECT_EQ(data["config_diff"]["rows"][0]["key"], "optim.lr");
  EXPECT_EQ(data["config_diff"]["rows"][0]["values"], json::array({"0.05", "0.1"}));
}

TEST(ReportConfigDiff, SameConfigsAndAMissingOneAreSaidSo) {
  TempDir t;
  auto f = cohort::testing::write_fixture_runs(t.path());
  write_bytes(f.one / "config.toml", "[optim]\nlr = 0.05\n");
  write_bytes(f.two / "config.toml", "[optim]\nlr = 0.05\n");
  EXPECT_EQ(report({f.one, f.two}).config_diff, "config: the runs' configurations are the same\n");
  fs::remove(f.two / "config.toml");
  auto r = report({f.one, f.two});
  EXPECT_NE(r.config_diff.find(f.two.filename().string() + " has no readable config.toml"),
            std::string::npos)
      << r.config_diff;
  EXPECT_EQ(report({f.one}).config_diff, "") << "one run: nothing to compare";
}

}  // namespace
