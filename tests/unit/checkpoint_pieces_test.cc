// A rank's checkpoint pieces travel to rank 0 as named tensors (train/checkpoint_shards.h):
// they come back as they were, names with '@' and 0-d shapes included, and a malformed name is
// an IoError naming the rank and the name.
#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "cohort/train/checkpoint_shards.h"

namespace cohort::train {
namespace {

TEST(CheckpointPieces, EncodedPiecesDecodeAsTheyWere) {
  std::vector<ckpt::TensorPiece> pieces{
      {"optimizer", "blocks.0.attn@odd.weight.exp_avg", {3, 4}, 5, zeros({6})},
      {"model", "scale", {}, 0, zeros({1})}};
  auto back = decode_pieces(encode_pieces(pieces), 2);
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].section, pieces[i].section);
    EXPECT_EQ(back[i].name, pieces[i].name);
    EXPECT_EQ(back[i].global_shape, pieces[i].global_shape);
    EXPECT_EQ(back[i].begin, pieces[i].begin);
    EXPECT_EQ(back[i].shard, 2);
  }
}

TEST(CheckpointPieces, AMalformedNameIsAnErrorNamingTheRank) {
  for (const char* key : {"no-slash@1@2", "optimizer/w@x@2", "optimizer/w@1@2xq", "@", "a/@"}) {
    SCOPED_TRACE(key);
    try {
      decode_pieces({{key, zeros({1})}}, 3);
      ADD_FAILURE() << "no error";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 3 sent a piece named"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cohort::train
