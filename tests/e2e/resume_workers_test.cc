// Resuming a checkpoint with another number of workers, end to end with real processes: with the
// same global batch (data.batch_size x workers x train.grad_accum_steps) every step sees the
// same samples, so the resumed steps' losses equal an uninterrupted run's (image data through
// the distributed sampler, and text); a different global batch converts the sampler position
// by samples consumed, or is refused with an error saying what to set.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/e2e/run_losses.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::expect_same_losses;
using cohort::testing::global_losses;
using cohort::testing::run_cli;

namespace {

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_resume_workers_e2e_", name);
}

std::string common(const fs::path& dir, const std::string& name) {
  return " --set run.threads=1 --set run.log_every=1 --set run.progress=plain"
         " --set comm.timeout_s=30 --set ckpt.async=false --set ckpt.keep=0 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// Synthetic 784-feature data, 192 samples (12 steps of 16 per epoch), a small MLP; checkpoints
// every 5 steps; 16 steps, so that the run crosses an epoch boundary.
std::string mlp(const fs::path& dir, const std::string& name, int workers, int batch) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set data.dataset=synthetic --set data.synthetic_samples=192 --set model.hidden=32"
         " --set optim.lr=0.02"
         " --set data.batch_size=" +
         std::to_string(batch) +
         " --set train.epochs=2 --set train.max_steps=16 --set ckpt.every_steps=5" +
         common(dir, name);
}

// A tiny byte-level GPT on a generated text file; checkpoints every 4 steps, 12 steps.
std::string gpt(const fs::path& dir, const fs::path& text, const std::string& name, int workers,
                int batch) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set model.type=gpt --set model.n_layer=1 --set model.n_head=2"
         " --set model.n_embd=16 --set model.block_size=16 --set data.dataset=text"
         " --set data.path=" +
         text.string() + " --set data.batch_size=" + std::to_string(batch) +
         " --set train.max_steps=12 --set train.sample_bytes=0 --set train.eval_every=0"
         " --set ckpt.every_steps=4" +
         common(dir, name);
}

}  // namespace

// 2 workers x 8 run 16 steps; from its mid-epoch checkpoint of step 5, 1 worker x 16, 4 workers
// x 4 and 1 worker x 8 x 2 micro-batches continue with the losses of the uninterrupted run,
// across the epoch boundary at step 12.
TEST(ResumeWorkers, SameGlobalBatchOnAnotherNumberOfWorkersContinuesTheRun) {
  fs::path d = fresh_dir("mlp");
  CliResult full = run_cli(mlp(d, "full", 2, 8));
  ASSERT_EQ(full.status, 0) << full.output;
  const auto expected = global_losses(d / "full", 2);
  ASSERT_EQ(expected.size(), 16u);
  const fs::path step5 = d / "full" / "checkpoints" / "step-0000000005";
  ASSERT_TRUE(fs::exists(step5));
  struct Split {
    const char* name;
    int workers, batch, accum;
  };
  for (Split s : {Split{"one", 1, 16, 1}, Split{"four", 4, 4, 1}, Split{"accum", 1, 8, 2}}) {
    SCOPED_TRACE(s.name);
    CliResult r = run_cli(mlp(d, s.name, s.workers, s.batch) + " --set train.grad_accum_steps=" +
                          std::to_string(s.accum) + " --resume " + step5.string());
    ASSERT_EQ(r.status, 0) << r.output;
    // The position, 5 batches of 16 samples, is 5 or 10 loader batches of this split.
    const int per_step = s.accum;
    EXPECT_TRUE(
        contains(r, "resumed from step 5 (epoch 0, batch " + std::to_string(5 * per_step) + ")"))
        << r.output;
    expect_same_losses(expected, global_losses(d / s.name, s.workers), 6, 16);
  }
}

// The same for text: a step's rows depend on (seed, step, row) only, so 1 worker x 8 and
// 4 workers x 2 continue a 2 workers x 4 run from its checkpoint of step 4 with its losses.
TEST(ResumeWorkers, TextRunsContinueOnAnotherNumberOfWorkers) {
  fs::path d = fresh_dir("text");
  fs::path text = d / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "In the beginning was the word, line " << i << ".\n";
  }
  CliResult full = run_cli(gpt(d, text, "full", 2, 4));
  ASSERT_EQ(full.status, 0) << full.output;
  const auto expected = global_losses(d / "full", 2);
  ASSERT_EQ(expected.size(), 12u);
  const fs::path step4 = d / "full" / "checkpoints" / "step-0000000004";
  for (auto [name, workers, batch] : {std::tuple{"one", 1, 8}, std::tuple{"four", 4, 2}}) {
    SCOPED_TRACE(name);
    CliResult r = run_cli(gpt(d, text, name, workers, batch) + " --resume " + step4.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r, "resumed from step 4")) << r.output;
    expect_same_losses(expected, global_losses(d / name, workers), 5, 12);
  }
}

// Another global batch: the position converts by samples consumed (80 after step 5 of 2 x 8:
// batch 2 of 4 x 10), and a global batch that does not divide them is refused, saying what to
// set to keep the checkpoint's.
TEST(ResumeWorkers, AnotherGlobalBatchConvertsThePositionOrIsRefused) {
  fs::path d = fresh_dir("convert");
  CliResult full = run_cli(mlp(d, "full", 2, 8) + " --set train.max_steps=5");
  ASSERT_EQ(full.status, 0) << full.output;
  const fs::path step5 = d / "full" / "checkpoints" / "step-0000000005";
  CliResult r =
      run_cli(mlp(d, "forty", 4, 10) + " --set train.max_steps=7 --resume " + step5.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "resumed from step 5 (epoch 0, batch 2)")) << r.output;
  EXPECT_TRUE(contains(r, "global batch of 16")) << r.output;
  CliResult bad = run_cli(mlp(d, "bad", 2, 12) + " --resume " + step5.string());
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_TRUE(contains(bad,
                       "written after 80 samples of epoch 0 with a global batch of 16 "
                       "(data.batch_size 8 x 2 worker(s) x train.grad_accum_steps 1)"))
      << bad.output;
  EXPECT_TRUE(contains(bad, "this run's global batch is 24")) << bad.output;
  EXPECT_TRUE(contains(bad, "set data.batch_size = 8 to keep the global batch of 16"))
      << bad.output;
}
