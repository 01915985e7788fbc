// The cosine schedule's warmup against the run's length, as a user meets it: the error names
// the config keys to change (not the optimizer class behind them) and comes before training.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::run_cli;

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_e2e_schedule_", name);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string kGptExample = std::string(COHORT_SOURCE_DIR) + "/examples/kjv_gpt.toml";

// The case: the GPT example (warmup 100) with a short train.max_steps.
TEST(ScheduleConfig, WarmupAboveMaxStepsNamesTheKeysBeforeTraining) {
  fs::path d = fresh_dir("max_steps");
  CliResult r =
      run_cli("train " + kGptExample + " --set train.max_steps=50 --set run.dir=" + d.string() +
              " --set run.name=short");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "optim.warmup_steps (100) must be <= train.max_steps (50)")) << r.output;
  EXPECT_TRUE(contains(r, "lower optim.warmup_steps to at most 50")) << r.output;
  EXPECT_FALSE(contains(r, "WarmupCosineLr")) << r.output;
  EXPECT_FALSE(fs::exists(d / "short" / "metrics.jsonl")) << "training started";
}

// With workers the launcher refuses the config once, before it starts any of them.
TEST(ScheduleConfig, WorkersAreNotLaunchedForABadWarmup) {
  fs::path d = fresh_dir("workers");
  CliResult r = run_cli("train " + kGptExample + " --workers 2 --set train.max_steps=50" +
                        " --set run.dir=" + d.string() + " --set run.name=short");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(count(r.output, "optim.warmup_steps (100)"), 1u) << r.output;
  EXPECT_FALSE(contains(r, "[rank")) << "workers were launched:\n" << r.output;
  EXPECT_FALSE(fs::exists(d / "short")) << "a run directory was made";
}

// A run bounded by train.epochs: its length is known once the data is, and the error says
// where the total comes from. 2048 synthetic samples / batch 64 = 32 steps.
TEST(ScheduleConfig, WarmupAboveAnEpochBoundedRunNamesEpochs) {
  fs::path d = fresh_dir("epochs");
  CliResult r = run_cli(
      "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=2048"
      " --set optim.schedule=cosine --set optim.warmup_steps=100 --set run.progress=none"
      " --set run.dir=" +
      d.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r,
                       "optim.warmup_steps (100) must be <= the run's total steps (32, from "
                       "train.epochs = 1 and train.max_steps = 0)"))
      << r.output;
  EXPECT_FALSE(contains(r, "WarmupCosineLr")) << r.output;
}

// The schedule's other bound is named by its keys too.
TEST(ScheduleConfig, MinLrAboveLrNamesTheKeys) {
  fs::path d = fresh_dir("min_lr");
  CliResult r = run_cli(
      "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=512"
      " --set optim.schedule=cosine --set optim.lr=0.01 --set optim.min_lr=0.1"
      " --set run.progress=none --set run.dir=" +
      d.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "optim.min_lr (0.1) must be <= optim.lr (0.01)")) << r.output;
  EXPECT_FALSE(contains(r, "WarmupCosineLr")) << r.output;
}

// The bound is inclusive: a warmup as long as the run is valid (and is not clamped away).
TEST(ScheduleConfig, WarmupEqualToMaxStepsTrains) {
  fs::path d = fresh_dir("equal");
  CliResult r = run_cli(
      "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=512"
      " --set optim.schedule=cosine --set optim.warmup_steps=4 --set train.max_steps=4"
      " --set run.progress=none --set train.eval_batches=1 --set run.dir=" +
      d.string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "done: 4 steps")) << r.output;
}

}  // namespace
