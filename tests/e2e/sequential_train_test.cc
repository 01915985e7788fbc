// model.type = "sequential" through `cohort train` (docs/models.md): a layer list written as
// TOML tables trains with 2 workers on images, a language model from a list trains on text, a
// run with batch norm and dropout resumes bit for bit (their buffers are in the checkpoint), and
// a list that does not fit the data is an error naming the layer before any worker starts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::contains;
using testing::read_bytes;
using testing::run_cli;

// A small CNN with batch norm, a residual block, average pooling and dropout, as TOML tables.
const char* const kImageModel = R"([model]
type = "sequential"

[[model.layers]]
type = "conv2d"
out = 8
kernel = 3
padding = 1

[[model.layers]]
type = "batchnorm"

[[model.layers]]
type = "relu"

[[model.layers]]
type = "residual"
layers = [{type = "conv2d", out = 8, kernel = 3, padding = 1}, {type = "relu"}]

[[model.layers]]
type = "avgpool"
kernel = 4

[[model.layers]]
type = "flatten"

[[model.layers]]
type = "dropout"
p = 0.1

[[model.layers]]
type = "linear"
)";

std::string write_config(const fs::path& dir) {
  fs::path p = dir / "seq.toml";
  std::ofstream(p) << kImageModel;
  return p.string();
}

std::string job(const std::string& config, const fs::path& dir, const std::string& name) {
  return "train " + config +
         " --set data.dataset=synthetic --set data.synthetic_samples=1024"
         " --set data.batch_size=32 --set run.threads=1 --set run.log_every=1"
         " --set run.progress=plain --set comm.timeout_s=60 --set optim.lr=0.05 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

double final_accuracy(const std::string& out) {
  const size_t at = out.rfind("accuracy ");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 9);
}

TEST(SequentialTrain, TomlTablesTrainACnnWithTwoWorkersAndTheRunRecordsTheList) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "cnn");
  CliResult r = run_cli(job(write_config(d), d, "cnn") + " --workers 2 --set train.epochs=2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GT(final_accuracy(r.output), 80.0) << r.output;
  std::string recorded = read_bytes(d / "cnn" / "config.toml");
  EXPECT_NE(recorded.find("layers = \"conv2d kernel=3 out=8 padding=1; batchnorm; relu; residual;"),
            std::string::npos)
      << recorded;
}

TEST(SequentialTrain, BatchNormAndDropoutResumeExactly) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "resume");
  const std::string config = write_config(d);
  // Synchronous checkpoints: the kill at step 6 must find step 4's written.
  const std::string common =
      " --workers 2 --set train.max_steps=12 --set ckpt.every_steps=4 --set ckpt.async=false";
  CliResult full = run_cli(job(config, d, "full") + common);
  ASSERT_EQ(full.status, 0) << full.output;
  CliResult crash = run_cli(job(config, d, "crash") + common +
                            " --set fault.kill_rank=0 --set fault.kill_at_step=6");
  ASSERT_EQ(crash.status, 128 + 9) << crash.output;
  CliResult resumed = run_cli(job(config, d, "crash") + common + " --resume auto");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed, "resumed from step 4")) << resumed.output;
  EXPECT_EQ(testing::step_losses(d / "full" / "metrics.jsonl"),
            testing::step_losses(d / "crash" / "metrics.jsonl"));
  fs::path a = testing::newest_checkpoint(d / "full"), b = testing::newest_checkpoint(d / "crash");
  ASSERT_EQ(b.filename(), a.filename());
  std::string model = read_bytes(a / "model.safetensors");
  EXPECT_NE(model.find("1.running_var"), std::string::npos);
  EXPECT_NE(model.find("6.rng_counter"), std::string::npos);
  EXPECT_EQ(model, read_bytes(b / "model.safetensors"));
}

TEST(SequentialTrain, ALanguageModelFromAListTrainsOnText) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "lm");
  fs::path text = d / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 300; ++i) out << "abcabcabc abcabc abc. ";
  }
  CliResult r = run_cli(
      "train /dev/null --set model.type=sequential --set model.block_size=16 --set "
      "'model.layers=embedding 32; positions; residual; layernorm; attention 2; end; layernorm; "
      "linear' --set data.dataset=text --set data.path=" +
      text.string() +
      " --set data.batch_size=8 --set train.max_steps=60 --set optim.name=adamw --set "
      "optim.lr=0.01 --set run.progress=plain --set run.log_every=60 --set run.threads=1 --set "
      "run.dir=" +
      d.string() + " --workers 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t at = r.output.rfind("validation loss ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::atof(r.output.c_str() + at + 16), 1.0) << r.output;  // ln 256 = 5.5 at start
}

// The examples docs/models.md shows run as written (a few steps, on small data).
TEST(SequentialTrain, TheExamplesRun) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "examples");
  CliResult r = run_cli(job(COHORT_SOURCE_DIR "/examples/fashion_sequential.toml", d, "cnn") +
                        " --set train.max_steps=5");
  EXPECT_EQ(r.status, 0) << r.output;
  fs::path text = d / "text.txt";
  std::ofstream(text) << std::string(5000, 'a');
  r = run_cli("train " COHORT_SOURCE_DIR
              "/examples/text_sequential.toml --set train.max_steps=5 "
              "--set train.eval_batches=1 --set run.progress=none --set data.path=" +
              text.string() + " --set run.dir=" + d.string());
  EXPECT_EQ(r.status, 0) << r.output;
}

// docs/models.md: a sequential model (batch norm, residual block, dropout) trains with every
// data-parallel strategy, not only DDP.
TEST(SequentialTrain, EveryDataParallelStrategyTrainsIt) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "strategies");
  const std::string config = write_config(d);
  for (const std::string strategy : {"zero", "local_sgd", "gossip", "ps"}) {
    std::string cmd = job(config, d, strategy) + " --workers 2 --set train.max_steps=12" +
                      " --set parallel.strategy=" + strategy;
    if (strategy == "zero") cmd += " --set zero.stage=3";
    if (strategy == "ps") cmd += " --servers 1";
    CliResult r = run_cli(cmd);
    EXPECT_EQ(r.status, 0) << strategy << ":\n" << r.output;
    EXPECT_TRUE(contains(r, "done: 12 steps")) << strategy << ":\n" << r.output;
  }
}

TEST(SequentialTrain, AListThatDoesNotFitTheDataNamesTheLayerBeforeAnyWorker) {
  fs::path d = testing::fresh_dir("cohort_seq_e2e_", "bad");
  CliResult r = run_cli(job("/dev/null", d, "bad") +
                        " --workers 2 --set model.type=sequential --set 'model.layers=conv2d 4 "
                        "kernel=3; linear'");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "model.layers: layer 2 (`linear`) gets [4, 26, 26] per sample"))
      << r.output;
  EXPECT_TRUE(contains(r, "add `flatten` before it")) << r.output;
  EXPECT_FALSE(contains(r, "[rank 1]")) << r.output;
  r = run_cli(job("/dev/null", d, "empty") + " --set model.type=sequential");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "needs model.layers")) << r.output;
}

}  // namespace
}  // namespace cohort
