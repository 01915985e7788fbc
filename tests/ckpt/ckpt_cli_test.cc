// `cohort ckpt inspect` and `cohort ckpt reshard` through the real binary: a sharded checkpoint
// written with CheckpointManager is listed, re-cut to 2 ranks and consolidated to 1, and the
// results load back with the same tensors; bad paths fail with messages naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/ckpt/sharded_test_util.h"
#include "tests/e2e/run_cli.h"
#include "tests/support/files.h"

namespace cohort::ckpt {
namespace {
namespace fs = std::filesystem;
using cohort::testing::run_cli;
using cohort::testing::TempDir;
using ::testing::HasSubstr;

// whole_checkpoint()'s tensors, read back through a view of what `root` holds now.
void expect_tensors(const std::string& root, int world) {
  CheckpointManager mgr({.dir = root, .keep = 0, .async = false});
  std::optional<CheckpointData> d = mgr.load_latest();
  ASSERT_TRUE(d.has_value()) << root;
  const ShardedView view(*d);
  EXPECT_EQ(view.world(), world);
  for (const auto& [name, t] : testing::whole_checkpoint().model)
    EXPECT_TRUE(testing::bitwise_equal(view.full("model", name), t)) << name;
  for (const auto& [name, t] : testing::whole_checkpoint().optimizer)
    EXPECT_TRUE(testing::bitwise_equal(view.full("optimizer", name), t)) << name;
}

class CkptCli : public ::testing::Test {
 protected:
  void SetUp() override {
    CheckpointManager mgr({.dir = src_, .keep = 0, .async = false});
    mgr.save(testing::sharded_checkpoint(3));
  }
  TempDir tmp_;
  std::string src_ = tmp_.file("src");
};

TEST_F(CkptCli, InspectListsShardsTensorsAndTotals) {
  for (const std::string& dir : {src_, src_ + "/step-0000000042"}) {
    const auto r = run_cli("ckpt inspect " + dir);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("checkpoint: " + src_ + "/step-0000000042\n"));
    EXPECT_THAT(r.output, HasSubstr("step: 42\n"));
    EXPECT_THAT(r.output, HasSubstr("world_size: 4\n"));
    EXPECT_THAT(r.output, HasSubstr("shards: 3 (shard-00000-of-00003 ...)\n"));
    EXPECT_THAT(r.output, HasSubstr("[13]         F32  0:[0,4) 1:[4,13)\n"));  // model c
    EXPECT_THAT(r.output, HasSubstr("[]           I64  2:[0,1)\n"));           // optimizer step
    EXPECT_THAT(r.output, HasSubstr("total model: 5 tensors, 144 bytes\n"));
    EXPECT_THAT(r.output, HasSubstr("total optimizer: 3 tensors, 96 bytes\n"));
  }
}

TEST_F(CkptCli, ReshardToTwoAndConsolidateToOne) {
  const std::string two = tmp_.file("two"), one = tmp_.file("one");
  auto r = run_cli("ckpt reshard " + src_ + " " + two + " --world 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("from 3 to 2 shards"));
  EXPECT_THAT(r.output, HasSubstr("wrote " + two + "/step-0000000042"));
  expect_tensors(two, 2);
  r = run_cli("ckpt reshard " + two + "/step-0000000042 " + one + " --world 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("from 2 to 1 shard (consolidated)"));
  expect_tensors(one, 1);
  EXPECT_FALSE(fs::exists(one + "/step-0000000042/shard-00000-of-00001.safetensors"));
  r = run_cli("ckpt inspect " + one);
  EXPECT_THAT(r.output, HasSubstr("shards: none (whole tensors)"));
  EXPECT_THAT(r.output, HasSubstr("[3, 5]       F32  whole\n"));
}

TEST_F(CkptCli, ErrorsNameThePath) {
  auto r = run_cli("ckpt inspect " + tmp_.file("nope"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr(tmp_.file("nope") + ": no such directory"));
  // Resharding into the source's own root would replace it: refused.
  r = run_cli("ckpt reshard " + src_ + " " + src_ + " --world 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr(src_ + "/step-0000000042 already exists"));
  // A torn checkpoint: the manifest catches the missing shard file.
  const std::string shard = src_ + "/step-0000000042/shard-00001-of-00003.safetensors";
  fs::remove(shard);
  r = run_cli("ckpt inspect " + src_ + "/step-0000000042");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr(shard));
  r = run_cli("ckpt reshard " + src_ + " " + tmp_.file("out") + " --world 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr(src_ + ": no step-<N> directory in it that verifies"));
}

}  // namespace
}  // namespace cohort::ckpt
