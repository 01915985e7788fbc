// The model_parallel strategy end to end with real processes: a GPT split into pipeline stages
// (GPipe, 1F1B), tensor-parallel shards and data-parallel replicas trains as one process does
// on the same global batch (losses and final parameters); its checkpoints resume on the same
// mesh exactly, and on one process or another mesh; a mesh that does not fit is refused naming
// the keys.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/ckpt/sharded.h"
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
  return cohort::testing::fresh_dir("cohort_mp_e2e_", name);
}

void write_text(const fs::path& d) {
  std::ofstream out(d / "text.txt");
  for (int i = 0; i < 300; ++i) out << "In the beginning was the word, and line " << i << ".\n";
}

// A small GPT (4 blocks of width 32) on a generated text, global batch `batch` (batch / dp per
// replica), AdamW with clipping, 20 steps, every step logged; `mesh` (last, so it may override
// the rest) is e.g. "--set parallel.pp=2".
std::string gpt(const fs::path& d, const std::string& name, int workers, int dp,
                const std::string& mesh, int batch = 8) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set model.type=gpt --set model.n_layer=4 --set model.n_head=4 --set model.n_embd=32"
         " --set model.block_size=16 --set data.dataset=text --set data.path=" +
         (d / "text.txt").string() + " --set data.batch_size=" + std::to_string(batch / dp) +
         " --set optim.name=adamw --set optim.lr=0.003 --set optim.clip_grad_norm=1.0"
         " --set train.max_steps=20 --set train.sample_bytes=0 --set train.eval_every=0"
         " --set train.eval_batches=1 --set ckpt.every_steps=10 --set ckpt.async=false"
         " --set ckpt.keep=0 --set run.threads=1 --set run.log_every=1 --set run.progress=none"
         " --set comm.timeout_s=30 --set run.dir=" +
         d.string() + " --set run.name=" + name + " " + mesh;
}

fs::path step_dir(const fs::path& d, const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%010d", step);
  return d / run / "checkpoints" / name;
}

// Every model tensor of a checkpoint, whole, however it was cut.
std::map<std::string, std::vector<float>> model_of(const fs::path& step) {
  const cohort::ckpt::CheckpointData data = cohort::ckpt::CheckpointManager::load(step.string());
  const cohort::ckpt::ShardedView view(data);
  std::map<std::string, std::vector<float>> out;
  for (const std::string& name : view.names("model")) {
    cohort::Tensor t = view.full("model", name);
    if (t.dtype() == cohort::DType::f32) out[name] = t.to_vector<float>();
  }
  return out;
}

void expect_same_model(const fs::path& want, const fs::path& got) {
  const auto a = model_of(want), b = model_of(got);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, x] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const std::vector<float>& y = b.at(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    // Per tensor, ||x - y|| <= 2e-4 ||x||, the losses being within 1e-5: AdamW normalises each
    // element's gradient, so an element whose gradient is mostly rounding noise moves by up to
    // lr whichever order the sums ran in, and 20 steps of it leave parameters further apart than
    // the losses (DDP on 2 ranks against one process, same run: up to 2.4e-5; these meshes up
    // to 6e-5). A lost or mis-scaled micro-batch is off by percents. The attention's key bias
    // (elements [C, 2C) of qkv.bias) is all noise (softmax ignores a shift shared by every key:
    // its true gradient is 0), so it is left out; it changes no output.
    const bool qkv_bias = name.size() > 13 && name.substr(name.size() - 13) == "attn.qkv.bias";
    const size_t C = x.size() / 3;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (qkv_bias && i >= C && i < 2 * C) continue;
      diff += double(x[i] - y[i]) * double(x[i] - y[i]);
      norm += double(x[i]) * double(x[i]);
    }
    EXPECT_LE(std::sqrt(diff), 2e-4 * std::sqrt(norm) + 1e-12) << name;
  }
}

struct Mesh {
  const char* name;
  int workers, dp;
  const char* keys;
};

// Steps 1..20 of `meshes` against one process on the same global batch: losses within 1e-5
// relative at every step, every final parameter tensor within 2e-4 (relative L2).
void expect_meshes_match_one_process(const fs::path& d, const std::vector<Mesh>& meshes,
                                     const std::string& model, int batch) {
  write_text(d);
  CliResult one = run_cli(gpt(d, "one", 1, 1, model, batch));
  ASSERT_EQ(one.status, 0) << one.output;
  const auto expected = global_losses(d / "one", 1);
  for (const Mesh& m : meshes) {
    SCOPED_TRACE(m.name);
    CliResult r = run_cli(gpt(d, m.name, m.workers, m.dp, model + " " + m.keys, batch));
    ASSERT_EQ(r.status, 0) << r.output;
    expect_same_losses(expected, global_losses(d / m.name, m.workers), 1, 20);
    expect_same_model(step_dir(d, "one", 20), step_dir(d, m.name, 20));
  }
}

}  // namespace

// Every split of the GPT trains as one process does on the same global batch. The small GPT, not
// the example's (width 128, context 128, batch 32): under AdamW the runs' losses drift apart
// by an amount that depends on the data, 20 steps of the example's GPT measured 3e-6 on this
// text and 1.3e-5 on a slightly different one (DDP on 2 ranks 2.5e-6), too close to the bound
// for a test; the small GPT stays within 1.5e-7.
TEST(ModelParallelTrain, EveryMeshMatchesOneProcess) {
  expect_meshes_match_one_process(
      fresh_dir("equivalence"),
      {
          Mesh{"pp2_gpipe", 2, 1, "--set parallel.pp=2 --set pipeline.schedule=gpipe"},
          Mesh{"pp2_1f1b", 2, 1, "--set parallel.pp=2 --set pipeline.schedule=1f1b"},
          Mesh{"pp4", 4, 1, "--set parallel.pp=4"},
          Mesh{"tp2", 2, 1, "--set parallel.tp=2"},
          Mesh{"tp4", 4, 1, "--set parallel.tp=4"},
          Mesh{"dp2_pp2", 4, 2, "--set parallel.dp=2 --set parallel.pp=2"},
          Mesh{"pp2_tp2", 4, 1, "--set parallel.pp=2 --set parallel.tp=2"},
          Mesh{"dp2_tp2", 4, 2, "--set parallel.dp=2 --set parallel.tp=2"},
      },
      "", 8);
}

// The other schedules and splits, on the small GPT: interleaved (2 virtual stages per rank),
// 1F1B with recomputation, stages given explicitly and balanced by measured time.
TEST(ModelParallelTrain, OtherSchedulesAndSplitsMatchOneProcess) {
  expect_meshes_match_one_process(
      fresh_dir("schedules"),
      {Mesh{"pp2_interleaved", 2, 1,
            "--set parallel.pp=2 --set pipeline.schedule=interleaved --set pipeline.chunks=2"},
       Mesh{"pp2_recompute_m2", 2, 1,
            "--set parallel.pp=2 --set pipeline.recompute=true --set pipeline.micro_batches=2"},
       Mesh{"pp2_layers_1_3", 2, 1, "--set parallel.pp=2 --set pipeline.layers=[1,3]"},
       Mesh{"pp2_balance_time", 2, 1, "--set parallel.pp=2 --set pipeline.balance=time"}},
      "", 8);
}

// A worker killed at step 13 restarts the job from step 10's checkpoint: step 20's losses
// and parameters are bit for bit those of the uninterrupted run (pp 2 x tp 2).
TEST(ModelParallelTrain, ResumeOnTheSameMeshIsExact) {
  fs::path d = fresh_dir("exact");
  write_text(d);
  const std::string mesh = "--set parallel.pp=2 --set parallel.tp=2";
  CliResult a = run_cli(gpt(d, "full", 4, 1, mesh));
  ASSERT_EQ(a.status, 0) << a.output;
  CliResult b = run_cli(gpt(d, "killed", 4, 1, mesh) +
                        " --max-restarts 1 --set fault.kill_rank=3 --set fault.kill_at_step=13");
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_TRUE(contains(b, "resumed from step 10")) << b.output;
  const auto full = global_losses(d / "full", 4), killed = global_losses(d / "killed", 4);
  for (int64_t step = 11; step <= 20; ++step) EXPECT_EQ(full.at(step), killed.at(step)) << step;
  const auto x = model_of(step_dir(d, "full", 20)), y = model_of(step_dir(d, "killed", 20));
  EXPECT_EQ(x, y);
}

// The checkpoint of pp 2 x tp 2 resumes on one process, on tp 2 and on pp 4: the next steps
// are the uninterrupted run's within 1e-5.
TEST(ModelParallelTrain, CheckpointResumesOnOneProcessAndOtherMeshes) {
  fs::path d = fresh_dir("reshard");
  write_text(d);
  CliResult a = run_cli(gpt(d, "full", 4, 1, "--set parallel.pp=2 --set parallel.tp=2"));
  ASSERT_EQ(a.status, 0) << a.output;
  const auto expected = global_losses(d / "full", 4);
  const fs::path step10 = step_dir(d, "full", 10);
  for (const Mesh& m : {Mesh{"one", 1, 1, ""}, Mesh{"tp2", 2, 1, "--set parallel.tp=2"},
                        Mesh{"pp4", 4, 1, "--set parallel.pp=4"}}) {
    SCOPED_TRACE(m.name);
    CliResult r = run_cli(gpt(d, m.name, m.workers, m.dp, m.keys) + " --resume " + step10.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r, "resumed from step 10")) << r.output;
    expect_same_losses(expected, global_losses(d / m.name, m.workers), 11, 20);
  }
}

// Meshes that do not fit the job or the model: the error names the keys and values.
TEST(ModelParallelTrain, AMeshThatDoesNotFitIsRefusedNamingTheKeys) {
  fs::path d = fresh_dir("errors");
  write_text(d);
  struct Case {
    int workers;
    const char* keys;
    const char* says;
  };
  for (const Case& c : {
           Case{4, "--set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2",
                "parallel.dp (2) * parallel.pp (2) * parallel.tp (2) = 8, but the job has 4"},
           Case{2, "--set parallel.pp=2 --set model.n_layer=1", "model.n_layer (1)"},
           Case{3, "--set parallel.tp=3", "model.n_head (4)"},
           Case{2, "--set parallel.pp=2 --set parallel.strategy=zero",
                "parallel.strategy = \"zero\" cannot be combined"},
           Case{2, "--set parallel.pp=2 --set pipeline.micro_batches=3",
                "pipeline.micro_batches = 3"},
           Case{2, "--set parallel.pp=2 --set pipeline.schedule=interleaved",
                "the interleaved schedule needs pipeline.chunks >= 2"},
           Case{2,
                "--set parallel.pp=2 --set pipeline.schedule=interleaved --set pipeline.chunks=2 "
                "--set pipeline.micro_batches=1",
                "multiple of parallel.pp (2)"},
       }) {
    SCOPED_TRACE(c.keys);
    CliResult r = run_cli(gpt(d, "bad", c.workers, 1, c.keys));
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_TRUE(contains(r, c.says)) << r.output;
  }
}

// A checkpoint of another GPT (6 or 2 blocks where the run has 4): every rank refuses it with
// the tensor's name, also the stages whose own tensors are all there.
TEST(ModelParallelTrain, ACheckpointOfAnotherModelIsRefusedOnEveryRank) {
  fs::path d = fresh_dir("other");
  write_text(d);
  for (int layers : {6, 2}) {
    const std::string name = "layers" + std::to_string(layers);
    CliResult a = run_cli(gpt(
        d, name, 1, 1, "--set train.max_steps=10 --set model.n_layer=" + std::to_string(layers)));
    ASSERT_EQ(a.status, 0) << a.output;
    CliResult b = run_cli(gpt(d, "pp2_" + name, 2, 1, "--set parallel.pp=2") + " --resume " +
                          step_dir(d, name, 10).string());
    EXPECT_NE(b.status, 0) << b.output;
    EXPECT_FALSE(contains(b, "resumed from step")) << b.output;
    EXPECT_TRUE(contains(b, layers == 6 ? "'blocks.4." : "no 'blocks.2.")) << b.output;
  }
}
