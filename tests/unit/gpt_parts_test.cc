// The GPT built from parts: pipeline stages (layer ranges) keep the whole model's names and
// values and compose to its forward; ShardSpec cuts, joins and initialises tensor-parallel
// shards as slices of the unsharded tensor.
#include <gtest/gtest.h>

#include "cohort/autograd/node.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/shard.h"

namespace cohort::nn {
namespace {

GptOptions small() {
  GptOptions o;
  o.n_layer = 4;
  o.n_head = 2;
  o.n_embd = 16;
  o.block_size = 8;
  o.seed = 7;
  return o;
}

GPT stage(int64_t begin, int64_t end) {
  GptOptions o = small();
  o.range = {begin, end};
  return GPT(o);
}

TEST(GptParts, StagesHoldTheWholeModelsNamesAndValues) {
  GPT whole(small());
  const StateDict all = whole.state_dict();
  size_t seen = 0;
  for (auto [b, e] : {std::pair{0, 1}, std::pair{1, 3}, std::pair{3, 4}}) {
    GPT part = stage(b, e);
    EXPECT_EQ(part.has_embedding(), b == 0);
    EXPECT_EQ(part.has_head(), e == 4);
    for (const auto& [name, t] : part.state_dict()) {
      ASSERT_TRUE(all.count(name)) << name;
      EXPECT_EQ(t.to_vector<float>(), all.at(name).to_vector<float>()) << name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, all.size());
}

TEST(GptParts, StagesComposeToTheWholeForward) {
  autograd::NoGradGuard no_grad;
  GPT whole(small());
  GPT a = stage(0, 2), b = stage(2, 4);
  whole.eval();
  a.eval();
  b.eval();
  Tensor idx = from_vector_i64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  EXPECT_EQ(b(a(idx)).to_vector<float>(), whole(idx).to_vector<float>());
}

TEST(GptParts, BadRangesAndStageInputsAreRefused) {
  GptOptions o = small();
  o.range = {2, 2};
  EXPECT_THROW(GPT{o}, InvalidArgument);
  o.range = {0, 5};
  EXPECT_THROW(GPT{o}, InvalidArgument);
  GPT second = stage(2, 4);
  try {
    second(from_vector_i64({1, 2}, {1, 2}));  // tokens where activations belong
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("previous stage's activations"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(second.generate("x", {}), InvalidArgument);
}

TEST(ShardSpec, CutsAndJoinsBlocksOfAFusedTensor) {
  // [6, 2]: q rows 0-1, k rows 2-3, v rows 4-5; 2 shards hold one row of each.
  Tensor full = from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {6, 2});
  ShardSpec s{.dim = 0, .parts = 3, .shards = 2, .index = 1};
  Tensor piece = take_shard(full, s);
  EXPECT_EQ(piece.to_vector<float>(), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(full_indices(piece.shape(), s), (std::vector<int64_t>{2, 3, 6, 7, 10, 11}));
  ShardSpec s0 = s;
  s0.index = 0;
  EXPECT_EQ(join_shards({take_shard(full, s0), piece}, s).to_vector<float>(),
            full.to_vector<float>());
  ShardSpec cols{.dim = 1, .parts = 1, .shards = 2, .index = 1};  // row-parallel: columns
  EXPECT_EQ(take_shard(full, cols).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_THROW(take_shard(full, ShardSpec{.dim = 0, .parts = 1, .shards = 4}), InvalidArgument);
}

TEST(ShardSpec, ShardInitIsTheSliceOfTheFullDraw) {
  for (const Init& rule : {Init::normal(0.1, 0.02), Init::uniform(-0.5, 0.5), Init::ones()}) {
    Tensor full = empty({6, 4});
    init::fill_(full, rule, 99);
    for (int64_t k = 0; k < 2; ++k) {
      ShardSpec s{.dim = 0, .parts = 3, .shards = 2, .index = k};
      Tensor piece = empty({3, 4});
      init::fill_shard_(piece, rule, 99, s);
      EXPECT_EQ(piece.to_vector<float>(), take_shard(full, s).to_vector<float>()) << rule.str();
    }
  }
}

}  // namespace
}  // namespace cohort::nn
