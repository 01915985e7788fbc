// Retention and moving aside never delete a checkpoint nobody asked to delete: retention
// removes only this directory's complete checkpoints older than the one just saved, beyond
// `keep`; moving aside keeps every generation, same step names included.
#include <gtest/gtest.h>

#include <filesystem>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/ckpt/checkpoint_aside.h"
#include "tests/ckpt/ckpt_test_util.h"
#include "tests/support/files.h"
#include "tests/support/tree_snapshot.h"

namespace cohort::ckpt {
namespace {
namespace fs = std::filesystem;
using cohort::testing::changed_files;
using cohort::testing::snapshot_tree;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;

CheckpointData data_at(int64_t step) {
  CheckpointData d;
  d.step = step;
  d.model = {{"w", testing::patterned({4, 3}, DType::f32, uint8_t(step))}};
  d.optimizer = {{"w.momentum", testing::patterned({4, 3}, DType::f32, uint8_t(step + 1))}};
  d.state = {{"step", step}};
  return d;
}

std::vector<std::string> names(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) out.push_back(fs::path(p).filename().string());
  return out;
}

// A directory holding what this manager did not write: a complete checkpoint numbered above
// everything it saves, one without a manifest, a user's file, and an earlier generation.
// Saving 10..40 with keep 2 removes 10 and 20 and nothing else; the old rule (newest `keep` of
// all) counted step 900 and deleted 30, the checkpoint it had just written.
TEST(CheckpointRetention, DeletesOnlyOwnOlderCheckpointsBeyondKeep) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  CheckpointManager({.dir = dir, .keep = 0, .async = false}).save(data_at(900));
  fs::create_directories(dir + "/step-0000000008");
  write_bytes(dir + "/step-0000000008/model.safetensors", "half-written");
  write_bytes(dir + "/notes.txt", "the user's own notes");
  CheckpointManager({.dir = earlier_root(dir) + "/1", .keep = 0, .async = false}).save(data_at(20));
  const auto before = snapshot_tree(tmp.path());

  CheckpointManager mgr({.dir = dir, .keep = 2, .async = false});
  for (int64_t step : {10, 20, 30, 40}) mgr.save(data_at(step));
  EXPECT_EQ(names(mgr.list()),
            (std::vector<std::string>{"step-0000000030", "step-0000000040", "step-0000000900"}));
  EXPECT_EQ(changed_files(before, snapshot_tree(tmp.path())), "");
  // keep 1: the checkpoint just written is the one kept, whatever lies above it.
  CheckpointManager one({.dir = dir, .keep = 1, .async = false});
  one.save(data_at(50));
  EXPECT_EQ(names(one.list()), (std::vector<std::string>{"step-0000000050", "step-0000000900"}));
  EXPECT_EQ(changed_files(before, snapshot_tree(tmp.path())), "");
  auto latest = one.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 900);  // loading is not retention's business: the newest verifies
}

// Moving the same step aside twice keeps both, each byte for byte; the flat layout of older
// versions and any generation already there stay as they are; numbers never go back.
TEST(CheckpointRetention, MovingAsideKeepsEveryGeneration) {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  const std::string root = earlier_root(dir + "/");
  EXPECT_EQ(root, dir + ".earlier");
  CheckpointManager({.dir = root, .keep = 0, .async = false}).save(data_at(400));  // flat layout
  CheckpointManager mgr({.dir = dir, .keep = 3, .async = false});

  mgr.save(data_at(400));
  auto first = snapshot_tree(dir);
  EXPECT_EQ(move_aside(mgr.list(), root), root + "/1");
  EXPECT_TRUE(mgr.list().empty());
  CheckpointData other = data_at(400);
  other.state["run"] = "second";
  mgr.save(other);
  const auto kept = snapshot_tree(root);
  EXPECT_EQ(move_aside(mgr.list(), root), root + "/2");
  const auto after = snapshot_tree(root);
  EXPECT_EQ(changed_files(kept, after), "");
  for (const auto& [path, state] : first)  // the first generation is the first run's bytes
    EXPECT_EQ(after.at("1/" + path).bytes, state.bytes) << path;
  EXPECT_EQ(CheckpointManager::load(root + "/2/step-0000000400").state["run"], "second");
  EXPECT_EQ(CheckpointManager::load(root + "/step-0000000400").step, 400);

  fs::create_directory(root + "/5");  // claimed by someone else meanwhile
  mgr.save(data_at(500));
  EXPECT_EQ(move_aside(mgr.list(), root), root + "/6");
  EXPECT_EQ(move_aside({}, root), "");  // nothing to move: no empty generation
  EXPECT_FALSE(fs::exists(root + "/7"));
}

}  // namespace
}  // namespace cohort::ckpt
