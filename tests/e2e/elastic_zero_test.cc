// ZeRO's in-place recovery end to end (docs/elastic.md), with real processes: ZeRO-3 on 4
// workers loses one and goes on with 3 without reading a checkpoint, ending where a resume of
// the same step's checkpoint at 3 workers ends (within float tolerance); under the default
// fixed global batch a lost worker and its respawned replacement end where the run without
// failures ends. Each rank keeps its neighbour's shard (zero_engine.h): the lost one's is there.
#include <gtest/gtest.h>

#include <filesystem>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::contains;
using testing::run_cli;

// The MLP on 4,096 synthetic samples, batch 64 a worker (16 steps an epoch at 4), AdamW, ZeRO-3
// in units small enough to split the model over several, a record every step.
std::string zero_job(const fs::path& dir, const std::string& name, int workers, int epochs) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set data.dataset=synthetic --set data.synthetic_samples=4096 --set model.hidden=[64]"
         " --set optim.name=adamw --set optim.lr=0.001 --set parallel.strategy=zero --set "
         "zero.stage=3 --set zero.unit_mb=0.01 --set train.epochs=" +
         std::to_string(epochs) +
         " --set run.threads=1 --set run.log_every=1 --set run.progress=plain --set "
         "ckpt.async=false --set ckpt.keep=0 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// The largest difference between the two runs' final parameters, relative to the largest
// parameter of the tensor.
double max_relative_difference(const fs::path& run_a, const fs::path& run_b) {
  auto a = ckpt::read_safetensors(testing::newest_checkpoint(run_a) / "model.safetensors");
  auto b = ckpt::read_safetensors(testing::newest_checkpoint(run_b) / "model.safetensors");
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const auto x = a[i].second.to_vector<float>(), y = b[i].second.to_vector<float>();
    double diff = 0, scale = 1e-30;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      diff = std::max(diff, double(std::abs(x[k] - y[k])));
      scale = std::max(scale, double(std::abs(y[k])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Killed after the last step of epoch 0 (step 16), rank 2's shard is rebuilt from rank 1's copy
// and the three train epoch 1 (22 steps of 3 x 64): as 3 workers resuming step 16's checkpoint.
TEST(ElasticZero, ZeroThreeGoesOnWithThreeAndEqualsAResumeAtThreeWorkers) {
  fs::path d = testing::fresh_dir("cohort_elastic_zero_", "resume");
  CliResult lost = run_cli(zero_job(d, "lost", 4, 2) +
                           " --set elastic.min_workers=2 --set elastic.fixed_batch=false --set "
                           "fault.kill_rank=2 --set fault.kill_at_step=16");
  ASSERT_EQ(lost.status, 0) << lost.output;
  EXPECT_TRUE(contains(lost,
                       "generation 1: 3 workers (4 before) go on from step 16 (launcher ranks "
                       "0,1,3)"))
      << lost.output;
  EXPECT_TRUE(contains(lost, "done: 38 steps")) << lost.output;
  EXPECT_FALSE(contains(lost, "resumed from")) << lost.output;
  CliResult first =
      run_cli(zero_job(d, "resumed", 4, 2) + " --set ckpt.every_steps=16 --set train.max_steps=16");
  ASSERT_EQ(first.status, 0) << first.output;
  CliResult rest = run_cli(zero_job(d, "resumed", 3, 2) + " --resume auto");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_TRUE(contains(rest, "resumed from step 16")) << rest.output;
  EXPECT_TRUE(contains(rest, "done: 38 steps")) << rest.output;
  // Rank 0 trains the same samples in both from step 17 on: its losses, and the final model.
  const auto want = testing::step_losses(d / "resumed" / "metrics.jsonl");
  const auto got = testing::step_losses(d / "lost" / "metrics.jsonl");
  for (int64_t step = 17; step <= 38; ++step) {
    ASSERT_TRUE(want.count(step) && got.count(step)) << "step " << step;
    EXPECT_NEAR(got.at(step), want.at(step), 1e-5 * std::abs(want.at(step))) << "step " << step;
  }
  EXPECT_LE(max_relative_difference(d / "lost", d / "resumed"), 1e-5);
}

// The default fixed global batch: the three compute the lost worker's slot, its respawned
// replacement receives rank 0's full state and takes its slot back; the run has the steps of
// the run without failures and ends with its parameters (within float tolerance: the slots'
// gradients are summed in another order). fault.slow_rank keeps the run going long enough for
// the replacement to join (a sleep: it changes no number).
TEST(ElasticZero, ALostWorkerAndItsReplacementEndWhereTheRunWithoutFailuresEnds) {
  fs::path d = testing::fresh_dir("cohort_elastic_zero_", "fixed");
  const std::string elastic =
      " --set elastic.min_workers=2 --set fault.slow_rank=0 --set fault.slow_factor=8";
  CliResult quiet = run_cli(zero_job(d, "quiet", 4, 4) + elastic);
  ASSERT_EQ(quiet.status, 0) << quiet.output;
  CliResult back = run_cli(zero_job(d, "back", 4, 4) + elastic +
                           " --respawn --set fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(back.status, 0) << back.output;
  EXPECT_TRUE(contains(back, "the global batch stays 256 samples (4 slots of 64 over 3 workers)"))
      << back.output;
  EXPECT_TRUE(contains(back, "joined generation 2 as rank 3 of 4 at step")) << back.output;
  EXPECT_TRUE(contains(back, "done: 64 steps")) << back.output;
  EXPECT_LE(max_relative_difference(d / "back", d / "quiet"), 1e-5);
}

}  // namespace
}  // namespace cohort
