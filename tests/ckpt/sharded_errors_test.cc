// Sharded checkpoints: every inconsistency between the index and the shard files is an error
// up front that names the tensor and the shard file (never a wrong tensor later).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cohort/ckpt/sharded.h"
#include "tests/ckpt/sharded_test_util.h"
#include "tests/support/errors.h"

namespace cohort::ckpt {
namespace {
using cohort::testing::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::index_entry;
using testing::sharded_checkpoint;

// World 3: model has 36 elements, 12 per shard; c (13 elements) is model [8, 21): c@0 in shard
// 0 ([0, 4)) and c@4 in shard 1 ([4, 13)).
constexpr int kWorld = 3;
const char* kShard0 = "shard-00000-of-00003.safetensors";
const char* kShard1 = "shard-00001-of-00003.safetensors";

std::string view_error(const CheckpointData& d) {
  return error_of<IoError>([&] { ShardedView v(d); });
}

TEST(ShardedCheckpointErrors, ShardFileMissing) {
  CheckpointData d = sharded_checkpoint(kWorld);
  d.extra.erase("shard-00001-of-00003");
  EXPECT_THAT(view_error(d), AllOf(HasSubstr(kShard1), HasSubstr("missing"), HasSubstr("model/c")));
}

TEST(ShardedCheckpointErrors, ShardFileTheIndexDoesNotList) {
  CheckpointData d = sharded_checkpoint(kWorld);
  d.extra["shard-00003-of-00004"] = {};
  EXPECT_THAT(view_error(d),
              AllOf(HasSubstr("shard-00003-of-00004.safetensors"), HasSubstr("not listed")));
  CheckpointData old = testing::whole_checkpoint();
  old.extra["shard-00000-of-00001"] = {};
  EXPECT_THAT(view_error(old), HasSubstr("shard-00000-of-00001.safetensors"));
}

TEST(ShardedCheckpointErrors, PieceListedButMissingFromItsFile) {
  CheckpointData d = sharded_checkpoint(kWorld);
  auto& file = d.extra["shard-00001-of-00003"];
  std::erase_if(file, [](const auto& nt) { return nt.first == "model/c@4"; });
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr(kShard1), HasSubstr("missing")));
}

TEST(ShardedCheckpointErrors, FileHoldsAPieceTheIndexDoesNotList) {
  CheckpointData d = sharded_checkpoint(kWorld);
  d.extra["shard-00000-of-00003"].emplace_back("model/c@99", randn({2}, 1));
  EXPECT_THAT(view_error(d),
              AllOf(HasSubstr("model/c@99"), HasSubstr(kShard0), HasSubstr("does not list")));
}

TEST(ShardedCheckpointErrors, PiecesOverlap) {
  CheckpointData d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["pieces"][1]["begin"] = 3;  // [3, 12) overlaps [0, 4)
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr("overlap"), HasSubstr(kShard0),
                                   HasSubstr(kShard1)));
}

TEST(ShardedCheckpointErrors, HoleInTheMiddleAndAtTheEnd) {
  CheckpointData d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["pieces"][1]["begin"] = 5;  // [5, 14): element 4 is nowhere
  index_entry(d, "model", "c")["pieces"][1]["numel"] = 8;
  EXPECT_THAT(view_error(d),
              AllOf(HasSubstr("model/c"), HasSubstr("[4, 5) are in no shard"), HasSubstr(kShard1)));
  d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["pieces"][1]["numel"] = 8;  // [4, 12): element 12 is nowhere
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr("[12, 13) are in no shard"),
                                   HasSubstr(kShard1)));
}

TEST(ShardedCheckpointErrors, PiecePastTheEnd) {
  CheckpointData d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["pieces"][1]["numel"] = 10;  // [4, 14) of 13
  EXPECT_THAT(view_error(d),
              AllOf(HasSubstr("model/c"), HasSubstr("past the end"), HasSubstr(kShard1)));
}

TEST(ShardedCheckpointErrors, DtypeOrSizeDiffersFromTheIndex) {
  CheckpointData d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["dtype"] = "F64";
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr(kShard0), HasSubstr("F64")));
  d = sharded_checkpoint(kWorld);
  index_entry(d, "model", "c")["shape"] = {3, 4};  // 12 elements: the last piece runs past
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr(kShard1)));
}

TEST(ShardedCheckpointErrors, TensorBothWholeAndInPieces) {
  CheckpointData d = sharded_checkpoint(kWorld);
  d.model.emplace_back("c", randn({13}, 1));
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/c"), HasSubstr("both whole"),
                                   HasSubstr("model.safetensors"), HasSubstr(kShard0)));
}

TEST(ShardedCheckpointErrors, MalformedIndexNamesTheTensor) {
  CheckpointData d = sharded_checkpoint(kWorld);
  index_entry(d, "optimizer", "w.exp_avg")["pieces"][0]["shard"] = 7;
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("optimizer/w.exp_avg"), HasSubstr("shard 7")));
  d = sharded_checkpoint(kWorld);
  d.state["shards"]["tensors"].push_back(index_entry(d, "model", "a"));
  EXPECT_THAT(view_error(d), AllOf(HasSubstr("model/a"), HasSubstr("twice")));
  d = sharded_checkpoint(kWorld);
  d.state["shards"]["world"] = "three";
  EXPECT_THAT(view_error(d), HasSubstr("\"shards\""));
}

// add_shards refuses what the view would: the caller learns at save time, not at resume.
TEST(ShardedCheckpointErrors, AddShardsRejectsBadPiecesAndLeavesTheCheckpointAlone) {
  CheckpointData d;
  d.state = {{"step", 1}};
  auto add = [&](std::vector<std::vector<TensorPiece>> p) {
    return error_of<InvalidArgument>([&] { add_shards(d, 2, p); });
  };
  const Shape s{5};
  EXPECT_THAT(add({{{"model", "x", s, 0, randn({2}, 1)}}, {{"model", "x", s, 3, randn({2}, 2)}}}),
              AllOf(HasSubstr("model/x"), HasSubstr("[2, 3) are in no shard"),
                    HasSubstr("shard-00001-of-00002")));
  EXPECT_THAT(
      add({{{"model", "x", s, 0, randn({3}, 1)}}, {{"model", "x", Shape{6}, 3, randn({2}, 2)}}}),
      AllOf(HasSubstr("model/x"), HasSubstr("global shape"), HasSubstr("shard-00001-of-00002")));
  EXPECT_THAT(
      add({{{"model", "x", s, 0, randn({5}, 1)}}, {{"model", "x", s, 0, empty({5}, DType::f64)}}}),
      AllOf(HasSubstr("model/x"), HasSubstr("shard-00001-of-00002")));
  EXPECT_THAT(add({{{"params", "x", s, 0, randn({5}, 1)}}, {}}), HasSubstr("params"));
  EXPECT_THAT(add({{}}), HasSubstr("2"));
  EXPECT_TRUE(d.extra.empty());
  EXPECT_FALSE(d.state.contains("shards"));
}

}  // namespace
}  // namespace cohort::ckpt
