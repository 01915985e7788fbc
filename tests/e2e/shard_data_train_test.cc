// Shard directories through `cohort train` (docs/data.md, "Shard directories"): data.path a
// directory of CSV or .npz files, dealt to the workers by name; each worker opens only its own
// shards, the workers step in lockstep on the smallest share, a crash resumes exactly, and a
// directory with too few shards, no evaluation split or a broken shard is an error naming it.
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

// `rows` rows of a 3-class problem in 6 features (class c: feature c high), from `first` on.
void write_shard(const fs::path& path, int first, int rows) {
  std::ofstream f(path);
  f << "a,b,c,d,e,f,label\n";
  for (int i = first; i < first + rows; ++i) {
    const int label = i % 3;
    for (int j = 0; j < 6; ++j)
      f << (j == label ? 2.0 : 0.0) + 0.3 * ((i * 7 + j * 3) % 5 - 2) << ",";
    f << label << "\n";
  }
}

class ShardTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "shards");
    // Unequal shards: worker 0 gets 0 and 2 (500 rows), worker 1 gets 1 and 3 (400 rows).
    const int rows[] = {300, 250, 200, 150};
    int first = 0;
    for (int s = 0; s < 4; ++s) {
      write_shard(dir_ / "shards" / ("part-" + std::to_string(s) + ".csv"), first, rows[s]);
      first += rows[s];
    }
    write_shard(dir_ / "test.csv", 5000, 300);
  }
  std::string train(const std::string& name, const std::string& sets = "") {
    return "train /dev/null --set model.hidden=[16] --set data.dataset=csv --set data.path=" +
           (dir_ / "shards").string() + " --set data.eval_path=" + (dir_ / "test.csv").string() +
           " --set data.batch_size=50 --set optim.lr=0.1 --set train.epochs=2 --set "
           "run.threads=1 --set run.log_every=1 --set run.progress=plain --set run.dir=" +
           (dir_ / "runs").string() + " --set run.name=" + name + " " + sets;
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

TEST_F(ShardTrain, EachWorkerReadsItsOwnShardsAndTheyStepInLockstep) {
  CliResult r = run_cli(train("two") + " --workers 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "[rank 0] [I")) << r.output;
  EXPECT_TRUE(contains(r, "shards of this worker: part-0.csv, part-2.csv (2 of 4")) << r.output;
  EXPECT_TRUE(contains(r, "shards of this worker: part-1.csv, part-3.csv (2 of 4")) << r.output;
  EXPECT_TRUE(contains(r, "this worker reads 500 samples of its own; 400 per epoch")) << r.output;
  // 400 samples per worker per epoch in batches of 50: 8 steps an epoch, 16 in all.
  EXPECT_TRUE(contains(r, "done: 16 steps")) << r.output;
  const size_t at = r.output.rfind("accuracy ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_GT(std::atof(r.output.c_str() + at + 9), 90.0) << r.output;
}

TEST_F(ShardTrain, ACrashResumesExactlyWithTheSameShards) {
  const std::string common = " --workers 2 --set ckpt.every_steps=4 --set ckpt.async=false";
  CliResult full = run_cli(train("full") + common);
  ASSERT_EQ(full.status, 0) << full.output;
  CliResult crash =
      run_cli(train("crash") + common + " --set fault.kill_rank=1 --set fault.kill_at_step=10");
  ASSERT_EQ(crash.status, 128 + 9) << crash.output;
  CliResult resumed = run_cli(train("crash") + common + " --resume auto");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed, "resumed from step 8")) << resumed.output;
  const fs::path runs = dir_ / "runs";
  EXPECT_EQ(testing::step_losses(runs / "full" / "metrics.jsonl"),
            testing::step_losses(runs / "crash" / "metrics.jsonl"));
  fs::path a = testing::newest_checkpoint(runs / "full"),
           b = testing::newest_checkpoint(runs / "crash");
  EXPECT_EQ(read_bytes(a / "model.safetensors"), read_bytes(b / "model.safetensors"));
  // Another worker count would deal the shards differently: refused, naming the count.
  CliResult other = run_cli(train("crash") + " --workers 3 --resume auto --set train.epochs=3");
  EXPECT_NE(other.status, 0) << other.output;
  EXPECT_TRUE(contains(other, "shard directory dealt to 2 workers; resume with 2")) << other.output;
}

TEST_F(ShardTrain, MistakesNameTheDirectoryOrTheShard) {
  CliResult r = run_cli(train("many") + " --workers 5");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "holds 4 shard(s) for 5 workers")) << r.output;
  r = run_cli(train("noeval", "--set data.eval_path="));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "is a shard directory: give the evaluation split in data.eval_path"))
      << r.output;
  std::ofstream(dir_ / "shards" / "part-3.csv", std::ios::app) << "1,2,3\n";  // a ragged row
  r = run_cli(train("ragged") + " --workers 2");
  EXPECT_NE(r.status, 0);
  const std::string bad = (dir_ / "shards" / "part-3.csv").string();
  EXPECT_TRUE(contains(r, "[rank 1] cohort: error: " + bad + ":152: expected 7 fields"))
      << r.output;
  // Rank 0 never opened it: its error is only that rank 1 went away.
  EXPECT_FALSE(contains(r, "[rank 0] cohort: error: " + bad)) << r.output;
}

}  // namespace
}  // namespace cohort
