// The one flat layout (ckpt/flat_layout.h): both shard rules, pieces and owners.
#include "cohort/ckpt/flat_layout.h"

#include <gtest/gtest.h>

namespace cohort::ckpt {
namespace {

std::vector<std::pair<int64_t, int64_t>> shards(int64_t total, int world, ShardRule rule) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int r = 0; r < world; ++r) {
    FlatRange s = shard_range(total, world, r, rule);
    out.emplace_back(s.begin, s.end);
  }
  return out;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// kEqual (ZeRO, checkpoints): ceil-sized shards, the tail short or empty.
TEST(FlatLayout, EqualRuleGivesCeilShards) {
  EXPECT_EQ(shards(10, 3, ShardRule::kEqual), (Ranges{{0, 4}, {4, 8}, {8, 10}}));
  EXPECT_EQ(shards(5, 4, ShardRule::kEqual), (Ranges{{0, 2}, {2, 4}, {4, 5}, {5, 5}}));
}

// kBalanced (parameter servers): sizes within one, none empty while world <= total.
TEST(FlatLayout, BalancedRuleGivesFloorBoundaries) {
  EXPECT_EQ(shards(10, 3, ShardRule::kBalanced), (Ranges{{0, 3}, {3, 6}, {6, 10}}));
  EXPECT_EQ(shards(5, 4, ShardRule::kBalanced), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 5}}));
}

TEST(FlatLayout, RulesAgreeWhenWorldDividesTotal) {
  EXPECT_EQ(shards(12, 4, ShardRule::kEqual), shards(12, 4, ShardRule::kBalanced));
}

TEST(FlatLayout, PiecesFollowTheRule) {
  const FlatLayout l({3, 4, 3}, 3, ShardRule::kBalanced);  // shards [0,3) [3,6) [6,10)
  const std::vector<FlatPiece> p = l.pieces_of_shard(1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].index, 1u);
  EXPECT_EQ(p[0].begin, 0);
  EXPECT_EQ(p[0].end, 3);
  EXPECT_EQ(p[0].flat_begin, 3);
  EXPECT_FALSE(piece_of(0, 0, 3, {3, 6}).has_value());
}

TEST(FlatLayout, OwnerOfAnOffset) {
  const FlatLayout equal({2, 0, 3}, 4);  // total 5, S = 2: [0,2) [2,4) [4,5) [5,5)
  EXPECT_EQ(equal.owner(0), 0);
  EXPECT_EQ(equal.owner(2), 1);
  EXPECT_EQ(equal.owner(5), 2);  // min(world - 1, 5 / 2): what resharded checkpoints record
  const FlatLayout balanced({10}, 3, ShardRule::kBalanced);
  EXPECT_EQ(balanced.owner(2), 0);
  EXPECT_EQ(balanced.owner(3), 1);
  EXPECT_EQ(balanced.owner(10), 2);
}

}  // namespace
}  // namespace cohort::ckpt
