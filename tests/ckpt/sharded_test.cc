// Sharded checkpoints: add_shards + ShardedView round trips on 1..4 ranks with uneven sizes,
// ranges read across piece boundaries, reshard N -> M, a real write and load through
// CheckpointManager, and old checkpoints (whole tensors only) read through the view.
#include "cohort/ckpt/sharded.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/ckpt/sharded_test_util.h"
#include "tests/support/files.h"

namespace cohort::ckpt {
namespace {
using testing::bitwise_equal;
using testing::sharded_checkpoint;
using testing::whole_checkpoint;

// Every tensor of the view equals whole_checkpoint()'s, whole and in every range.
void expect_same_tensors(const ShardedView& view) {
  const CheckpointData want = whole_checkpoint();
  for (const auto& [section, tensors] :
       {std::pair{"model", want.model}, std::pair{"optimizer", want.optimizer}}) {
    std::vector<std::string> names;
    for (const auto& [name, t] : tensors) names.push_back(name);
    EXPECT_EQ(view.names(section), names) << section;
    for (const auto& [name, t] : tensors) {
      SCOPED_TRACE(std::string(section) + "/" + name);
      EXPECT_EQ(view.shape(section, name), t.shape());
      EXPECT_EQ(view.dtype(section, name), t.dtype());
      EXPECT_TRUE(bitwise_equal(view.full(section, name), t));
      for (int64_t b = 0; b <= t.numel(); ++b)
        for (int64_t e = b; e <= t.numel(); ++e)
          ASSERT_TRUE(bitwise_equal(view.read(section, name, b, e), testing::flat_slice(t, b, e)))
              << "[" << b << ", " << e << ")";
    }
  }
}

TEST(ShardedCheckpoint, RoundTripOnOneToFourRanks) {
  for (int world = 1; world <= 4; ++world) {
    SCOPED_TRACE("world " + std::to_string(world));
    const CheckpointData d = sharded_checkpoint(world);
    EXPECT_TRUE(d.model.empty());
    EXPECT_EQ(d.extra.size(), size_t(world));
    EXPECT_TRUE(d.extra.count(shard_file_name(world - 1, world)));
    EXPECT_EQ(d.state["shards"]["world"], world);
    EXPECT_EQ(d.state["step"], 42);
    const ShardedView view(d);
    EXPECT_EQ(view.world(), world);
    expect_same_tensors(view);
  }
}

TEST(ShardedCheckpoint, PiecesSayWhereEachSliceLives) {
  const ShardedView view(sharded_checkpoint(4));                 // model: 36 elements, 9 per shard
  const std::vector<TensorPiece> c = view.pieces("model", "c");  // c is [8, 21)
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].shard, 0);
  EXPECT_EQ(c[0].begin, 0);
  EXPECT_EQ(c[0].data.numel(), 1);
  EXPECT_EQ(c[1].shard, 1);
  EXPECT_EQ(c[1].begin, 1);
  EXPECT_EQ(c[1].data.numel(), 9);
  EXPECT_EQ(c[2].shard, 2);
  EXPECT_EQ(c[2].begin, 10);
  EXPECT_EQ(c[2].global_shape, Shape{13});
  EXPECT_EQ(view.pieces("model", "e").size(), 1u);  // the empty tensor is still recorded
  EXPECT_TRUE(view.has("optimizer", "step"));
  EXPECT_FALSE(view.has("model", "step"));
  EXPECT_THROW(view.read("model", "c", 5, 14), InvalidArgument);
  EXPECT_THROW(view.full("model", "nope"), InvalidArgument);
}

TEST(ShardedCheckpoint, ReshardNToMGivesIdenticalTensors) {
  for (int n = 1; n <= 4; ++n) {
    for (int m = 1; m <= 4; ++m) {
      SCOPED_TRACE(std::to_string(n) + " -> " + std::to_string(m));
      const CheckpointData out = reshard(sharded_checkpoint(n), m);
      EXPECT_EQ(out.step, 42);
      EXPECT_EQ(out.state["world_size"], 4);  // the rest of the state is kept as it was
      const ShardedView view(out);
      EXPECT_EQ(view.world(), m);
      expect_same_tensors(view);
      if (m == 1) {  // consolidated: whole tensors, no shard files, no index
        EXPECT_TRUE(out.extra.empty());
        EXPECT_FALSE(out.state.contains("shards"));
        EXPECT_EQ(out.model.size(), 5u);
      } else {
        EXPECT_EQ(out.extra.size(), size_t(m));
        EXPECT_TRUE(out.model.empty());
      }
    }
  }
}

TEST(ShardedCheckpoint, OldCheckpointWithWholeTensorsReadsThroughTheView) {
  CheckpointData d = whole_checkpoint();
  d.extra["strategy.rank0"] = {{"residual", randn({4}, 9)}};  // not a shard file: ignored
  const ShardedView view(d);
  EXPECT_EQ(view.world(), 1);
  expect_same_tensors(view);
  const std::vector<TensorPiece> w = view.pieces("model", "w");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].shard, -1);
  EXPECT_EQ(w[0].data.numel(), 15);
  // And resharding it keeps the other extra file as it is.
  const CheckpointData out = reshard(d, 3);
  EXPECT_EQ(out.extra.size(), 4u);
  EXPECT_TRUE(out.extra.count("strategy.rank0"));
  expect_same_tensors(ShardedView(out));
}

TEST(ShardedCheckpoint, WrittenByCheckpointManagerAndLoadedBack) {
  cohort::testing::TempDir tmp;
  CheckpointManager mgr({.dir = tmp.file("ckpt"), .keep = 0, .async = false});
  mgr.save(sharded_checkpoint(3));
  ASSERT_EQ(mgr.list().size(), 1u);
  const std::filesystem::path dir = mgr.list()[0];
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(std::filesystem::exists(dir / (shard_file_name(r, 3) + ".safetensors")));
  const CheckpointData loaded = CheckpointManager::load(dir.string());
  const ShardedView view(loaded);
  EXPECT_EQ(view.world(), 3);
  expect_same_tensors(view);
}

}  // namespace
}  // namespace cohort::ckpt
