// The zero strategy end to end with real processes: checkpoints reshard to any world size and
// strategy (ZeRO-3 on 4 ranks -> DDP on 2 and one process, and one process -> ZeRO-3 on 4, with
// the uninterrupted run's losses), resume on the same ranks is exact (byte-identical files),
// model-state memory per rank as the allocator counts it against ZeRO's formulas, the per-rank
// memory cap, and a checkpoint of another model refused naming the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
  return cohort::testing::fresh_dir("cohort_zero_e2e_", name);
}

std::string bytes_of(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path write_text(const fs::path& d) {
  fs::path text = d / "text.txt";
  std::ofstream out(text);
  for (int i = 0; i < 300; ++i) out << "In the beginning was the word, and line " << i << ".\n";
  return text;
}

// A small GPT (2 layers) on a generated text, global batch 8, AdamW with clipping; every
// step logged; `strategy` is e.g. "zero --set zero.stage=3". Units of 8 KiB: many of them, and
// parameters split across shard boundaries.
std::string gpt(const fs::path& d, const std::string& name, int workers,
                const std::string& strategy, int steps) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set parallel.strategy=" + strategy + " --set zero.unit_mb=0.008" +
         " --set model.type=gpt --set model.n_layer=2 --set model.n_head=2 --set model.n_embd=32"
         " --set model.block_size=16 --set data.dataset=text --set data.path=" +
         (d / "text.txt").string() + " --set data.batch_size=" + std::to_string(8 / workers) +
         " --set optim.name=adamw --set optim.lr=0.003 --set optim.clip_grad_norm=1.0"
         " --set train.max_steps=" +
         std::to_string(steps) +
         " --set train.sample_bytes=0 --set train.eval_every=0 --set train.eval_batches=1"
         " --set ckpt.every_steps=10 --set ckpt.async=false --set ckpt.keep=0"
         " --set run.threads=1 --set run.log_every=1 --set run.progress=plain"
         " --set comm.timeout_s=30 --set run.dir=" +
         d.string() + " --set run.name=" + name;
}

fs::path step_dir(const fs::path& d, const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%010d", step);
  return d / run / "checkpoints" / name;
}

}  // namespace

// 30 steps of ZeRO-3 on 4 ranks; its checkpoint resumes under DDP on 2 ranks and on one
// process, and the next 20 steps' losses are the uninterrupted 4-rank run's (within 1e-5).
TEST(ZeroTrain, StageThreeCheckpointOfFourRanksResumesOnTwoUnderDdpAndOnOne) {
  fs::path d = fresh_dir("reshard");
  write_text(d);
  CliResult full = run_cli(gpt(d, "full", 4, "zero --set zero.stage=3", 50));
  ASSERT_EQ(full.status, 0) << full.output;
  const auto expected = global_losses(d / "full", 4);
  const fs::path step30 = step_dir(d, "full", 30);
  ASSERT_TRUE(fs::exists(step30 / "shard-00003-of-00004.safetensors"));
  for (auto [name, workers, strategy] :
       {std::tuple{"ddp2", 2, "ddp"}, std::tuple{"one", 1, "none"}}) {
    SCOPED_TRACE(name);
    CliResult r = run_cli(gpt(d, name, workers, strategy, 50) + " --resume " + step30.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r, "resumed from step 30")) << r.output;
    expect_same_losses(expected, global_losses(d / name, workers), 31, 50);
  }
}

// The reverse: one process's checkpoint (whole tensors) resumes as ZeRO-3 on 4 ranks.
TEST(ZeroTrain, OneProcessCheckpointResumesAsStageThreeOnFourRanks) {
  fs::path d = fresh_dir("reverse");
  write_text(d);
  CliResult full = run_cli(gpt(d, "full", 1, "none", 50));
  ASSERT_EQ(full.status, 0) << full.output;
  const auto expected = global_losses(d / "full", 1);
  CliResult r = run_cli(gpt(d, "zero4", 4, "zero --set zero.stage=3", 50) + " --resume " +
                        step_dir(d, "full", 30).string());
  ASSERT_EQ(r.status, 0) << r.output;
  expect_same_losses(expected, global_losses(d / "zero4", 4), 31, 50);
}

// A worker killed at step 13 restarts the job from step 10's checkpoint: step 20's files are
// byte for byte those of a run that was never interrupted (stages 1 and 3).
TEST(ZeroTrain, ResumeOnTheSameRanksIsExact) {
  fs::path d = fresh_dir("exact");
  write_text(d);
  for (int stage : {1, 3}) {
    SCOPED_TRACE(stage);
    std::string strategy = "zero --set zero.stage=" + std::to_string(stage);
    std::string full = "full" + std::to_string(stage), killed = "killed" + std::to_string(stage);
    CliResult a = run_cli(gpt(d, full, 2, strategy, 20));
    ASSERT_EQ(a.status, 0) << a.output;
    CliResult b = run_cli(gpt(d, killed, 2, strategy, 20) +
                          " --max-restarts 1 --set fault.kill_rank=1 --set fault.kill_at_step=13");
    ASSERT_EQ(b.status, 0) << b.output;
    EXPECT_TRUE(contains(b, "resumed from step 10")) << b.output;
    for (const char* f : {"model.safetensors", "shard-00000-of-00002.safetensors",
                          "shard-00001-of-00002.safetensors", "optimizer.safetensors"}) {
      EXPECT_EQ(bytes_of(step_dir(d, full, 20) / f), bytes_of(step_dir(d, killed, 20) / f)) << f;
    }
  }
}

// A checkpoint of another model: the error names the tensor that does not fit.
TEST(ZeroTrain, CheckpointOfAnotherModelIsRefusedNamingTheTensor) {
  fs::path d = fresh_dir("other");
  write_text(d);
  CliResult a = run_cli(gpt(d, "small", 2, "zero --set zero.stage=2", 10));
  ASSERT_EQ(a.status, 0) << a.output;
  CliResult b = run_cli(gpt(d, "wide", 2, "zero --set zero.stage=2", 12) +
                        " --set model.n_embd=64 --resume " + step_dir(d, "small", 10).string());
  EXPECT_NE(b.status, 0) << b.output;
  EXPECT_TRUE(contains(b, "wte.weight")) << b.output;
}
