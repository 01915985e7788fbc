// In-place recovery on text data (docs/elastic.md): a step's rows of random windows depend on
// the step alone, and under the fixed global batch slot k is rows k * data.batch_size onwards,
// so the GPT's survivors draw the lost worker's share of each step themselves. In exact mode the
// run that lost a worker ends byte-identical to the run that did not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::contains;
using testing::run_cli;

// A 2-layer GPT on a generated text, 3 workers of 4 windows each, 30 steps, exact mode.
std::string gpt_job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --workers 3 --set model.type=gpt --set model.n_layer=2 --set "
         "model.n_head=2 --set model.n_embd=32 --set model.block_size=16 --set "
         "data.dataset=text --set data.path=" +
         (dir / "text.txt").string() +
         " --set data.batch_size=4 --set optim.name=adamw --set optim.lr=0.003 --set "
         "train.max_steps=30 --set train.sample_bytes=0 --set train.eval_every=0 --set "
         "train.eval_batches=1 --set run.threads=1 --set run.log_every=1 --set "
         "run.progress=plain --set elastic.min_workers=2 --set elastic.exact=true --set "
         "ckpt.async=false --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

TEST(ElasticText, AGptThatLosesAWorkerEndsBitIdenticalToOneThatDoesNot) {
  fs::path d = testing::fresh_dir("cohort_elastic_text_", "exact");
  {
    std::ofstream text(d / "text.txt");
    for (int i = 0; i < 300; ++i) text << "In the beginning was the word, and line " << i << ".\n";
  }
  CliResult quiet = run_cli(gpt_job(d, "quiet"));
  ASSERT_EQ(quiet.status, 0) << quiet.output;
  CliResult lost =
      run_cli(gpt_job(d, "lost") + " --set fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(lost.status, 0) << lost.output;
  EXPECT_TRUE(contains(lost, "generation 1: 2 workers (3 before) go on from step 10"))
      << lost.output;
  EXPECT_TRUE(contains(lost, "the global batch stays 12 samples (3 slots of 4 over 2 workers)"))
      << lost.output;
  EXPECT_TRUE(contains(lost, "done: 30 steps")) << lost.output;
  auto steps = testing::records_of(d / "lost" / "metrics.jsonl", "step");
  ASSERT_EQ(steps.size(), 30u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i]["step"], int64_t(i + 1));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(testing::read_bytes(testing::newest_checkpoint(d / "quiet") / f),
              testing::read_bytes(testing::newest_checkpoint(d / "lost") / f))
        << f;
}

}  // namespace
}  // namespace cohort
