// Runs never overwrite each other (train/run_dir.h), with the real CLI: a second fresh run
// under the same name goes to <name>.2 and changes none of the first run's files (bytes and
// mtimes of every one), under `cohort train`, `--workers 2` and another launcher (`cohort run`,
// where rank 0's choice reaches every rank through the store); `--resume auto` continues the
// newest; checkpoints moved out of a shared ckpt.dir keep every generation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cohort/train/run_dir.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/tree_snapshot.h"

namespace fs = std::filesystem;
using cohort::testing::changed_files;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::run_cli;
using cohort::testing::snapshot_tree;

namespace {

std::string job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=512"
         " --set data.batch_size=32 --set run.threads=1 --set run.progress=none"
         " --set comm.timeout_s=30 --set ckpt.every_steps=4 --set ckpt.keep=1 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_run_dir_e2e_", name);
}

// How many records of `event` a metrics file holds.
int records(const fs::path& jsonl, const std::string& event) {
  std::ifstream in(jsonl);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    n += nlohmann::json::parse(line)["event"] == event;
  return n;
}

}  // namespace

TEST(RunDir, ASecondRunUnderTheSameNameChangesNoneOfTheFirstRunsFiles) {
  const fs::path d = fresh_dir("same");
  CliResult first = run_cli(job(d, "r"));
  ASSERT_EQ(first.status, 0) << first.output;
  const auto r1 = snapshot_tree(d / "r");
  ASSERT_TRUE(r1.count("metrics.jsonl") && r1.count("config.toml")) << first.output;

  CliResult second = run_cli(job(d, "r"));  // one process
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_TRUE(contains(second, (d / "r").string() + " holds an earlier run")) << second.output;
  EXPECT_TRUE(contains(second, "run dir " + (d / "r.2").string())) << second.output;
  EXPECT_TRUE(contains(second, "metrics: " + (d / "r.2" / "metrics.jsonl").string()))
      << second.output;
  EXPECT_EQ(changed_files(r1, snapshot_tree(d / "r")), "");
  const auto r2 = snapshot_tree(d / "r.2");
  EXPECT_EQ(records(d / "r.2" / "metrics.jsonl", "start"), 1);
  // config.toml records the name it was written under: it resumes this run.
  const std::string& config = r2.at("config.toml").bytes;
  EXPECT_NE(config.find("name = \"r.2\""), std::string::npos) << config;

  CliResult third = run_cli(job(d, "r") + " --workers 2");  // the launcher chooses
  ASSERT_EQ(third.status, 0) << third.output;
  EXPECT_TRUE(contains(third, "this run writes " + (d / "r.3").string())) << third.output;
  EXPECT_EQ(changed_files(r1, snapshot_tree(d / "r")), "");
  EXPECT_EQ(changed_files(r2, snapshot_tree(d / "r.2")), "");
  EXPECT_TRUE(fs::exists(d / "r.3" / "metrics.rank1.jsonl"));

  // --resume auto continues the newest run of the name, appending to its metrics.
  CliResult resumed = run_cli(job(d, "r") + " --workers 2 --set train.epochs=2 --resume auto");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed, "resumed from step 8")) << resumed.output;
  EXPECT_FALSE(contains(resumed, "holds an earlier run")) << resumed.output;
  EXPECT_EQ(records(d / "r.3" / "metrics.jsonl", "start"), 2);
  EXPECT_EQ(records(d / "r.3" / "metrics.rank1.jsonl", "start"), 2);
  EXPECT_EQ(changed_files(r1, snapshot_tree(d / "r")), "");
  EXPECT_EQ(changed_files(r2, snapshot_tree(d / "r.2")), "");
  EXPECT_FALSE(fs::exists(d / "r.4"));
  EXPECT_EQ(records(d / "r" / "metrics.jsonl", "start"), 1);
}

// Workers of another launcher agree on rank 0's choice (through the store): both ranks'
// files land in r.2, none in r.
TEST(RunDir, WorkersOfAnotherLauncherAgreeOnTheDirectory) {
  const fs::path d = fresh_dir("other");
  const std::string run = std::string("run -n 2 -- ") + COHORT_BIN + " " + job(d, "r");
  CliResult first = run_cli(run);
  ASSERT_EQ(first.status, 0) << first.output;
  const auto r1 = snapshot_tree(d / "r");
  ASSERT_TRUE(r1.count("metrics.rank1.jsonl")) << first.output;
  CliResult second = run_cli(run);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_EQ(changed_files(r1, snapshot_tree(d / "r")), "");
  EXPECT_EQ(records(d / "r.2" / "metrics.jsonl", "start"), 1);
  EXPECT_EQ(records(d / "r.2" / "metrics.rank1.jsonl", "start"), 1);
  EXPECT_FALSE(fs::exists(d / "r.3"));
}

// A ckpt.dir shared by fresh runs: each run's checkpoints are moved into their own generation
// <ckpt.dir>.earlier/<n>/, same step names, none replaced.
TEST(RunDir, ASharedCheckpointDirKeepsEveryGeneration) {
  const fs::path d = fresh_dir("shared");
  const std::string args = job(d, "s") + " --set ckpt.dir=" + (d / "ck").string();
  ASSERT_EQ(run_cli(args).status, 0);
  const auto one = snapshot_tree(d / "ck");
  CliResult second = run_cli(args);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_TRUE(contains(second, "to " + (d / "ck.earlier" / "1").string())) << second.output;
  CliResult third = run_cli(args);
  ASSERT_EQ(third.status, 0) << third.output;
  const auto earlier = snapshot_tree(d / "ck.earlier");
  for (const auto& [path, state] : one)
    EXPECT_EQ(earlier.at("1/" + path).bytes, state.bytes) << path;
  EXPECT_TRUE(fs::exists(d / "ck.earlier" / "2" / "step-0000000016" / "MANIFEST.json"));
  EXPECT_TRUE(fs::exists(d / "ck" / "step-0000000016" / "MANIFEST.json"));
}

// The choice itself: a fresh run takes the next number above the newest (never a gap below
// it), so the newest directory is always the latest fresh run, which a resume continues.
TEST(RunDir, NumbersOnlyGoUpAndContinuingTakesTheNewest) {
  using cohort::train::choose_run_dir;
  using cohort::train::RunStart;
  const fs::path d = fresh_dir("choice");
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kFresh).path, (d / "x").string());
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kFresh).path, (d / "x").string());  // empty
  std::ofstream(d / "x" / "metrics.jsonl") << "{}\n";
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kFresh).path, (d / "x.2").string());
  fs::create_directories(d / "x.7");
  fs::create_directories(d / "x.05");  // not a number of ours
  fs::create_directories(d / "xy.9");  // another name
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kContinue).path, (d / "x.7").string());
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kFresh).path, (d / "x.8").string());
  fs::remove_all(d / "x");  // the base gone: still above the newest
  EXPECT_EQ(choose_run_dir(d.string(), "x", RunStart::kFresh).path, (d / "x.9").string());
  EXPECT_EQ(choose_run_dir(d.string(), "new", RunStart::kContinue).path, (d / "new").string());
}
