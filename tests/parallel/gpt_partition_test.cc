// Pipeline stage assignment of the GPT's blocks: balanced by cost, explicit counts, and the
// chunks' module keeping the whole model's names.
#include <gtest/gtest.h>

#include "cohort/parallel/pipeline/gpt_partition.h"

namespace cohort::parallel {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

Ranges pairs(const std::vector<nn::GptRange>& r) {
  Ranges out;
  for (const nn::GptRange& x : r) out.emplace_back(x.begin, x.end);
  return out;
}

TEST(GptPartition, BalancesBlocksAgainstTheEmbeddingsAndHead) {
  // Equal blocks, free ends: as even as possible.
  EXPECT_EQ(pairs(balance_gpt(4, 2, {0, 1, 0})), (Ranges{{0, 2}, {2, 4}}));
  EXPECT_EQ(pairs(balance_gpt(4, 4, {0, 1, 0})), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  // A heavy head (2 blocks' worth): the last stage gets fewer blocks.
  EXPECT_EQ(pairs(balance_gpt(6, 2, {0, 1, 2})), (Ranges{{0, 4}, {4, 6}}));
  // A heavy embedding: the first stage gets fewer.
  EXPECT_EQ(pairs(balance_gpt(7, 3, {3, 1, 0})), (Ranges{{0, 1}, {1, 4}, {4, 7}}));
  EXPECT_EQ(pairs(balance_gpt(3, 1, {5, 1, 5})), (Ranges{{0, 3}}));
}

TEST(GptPartition, ParameterCostsCountTheLayers) {
  nn::GptOptions o;
  o.n_embd = 128;
  o.vocab_size = 256;
  o.block_size = 128;
  const GptCosts c = gpt_parameter_costs(o);
  nn::GptBlock block(o);
  EXPECT_EQ(c.block, double(block.num_parameters()));
  EXPECT_EQ(c.embedding, 256.0 * 128 + 128.0 * 128);
  EXPECT_EQ(c.head, 128.0 * 256 + 2 * 128);
}

TEST(GptPartition, ExplicitCountsAndErrorsNameTheKeys) {
  EXPECT_EQ(pairs(gpt_ranges_from_counts(4, {1, 3})), (Ranges{{0, 1}, {1, 4}}));
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              gpt_ranges_from_counts(4, {1, 2});
            }).find("pipeline.layers sums to 3"),
            std::string::npos);
  EXPECT_NE(message([] {
              gpt_ranges_from_counts(4, {0, 4});
            }).find("at least one"),
            std::string::npos);
  EXPECT_NE(message([] {
              balance_gpt(2, 3, {0, 1, 0});
            }).find("model.n_layer (2)"),
            std::string::npos);
}

TEST(GptPartition, ChunksKeepTheWholeModelsNames) {
  nn::GptOptions o;
  o.n_layer = 4;
  o.n_embd = 16;
  o.n_head = 2;
  o.block_size = 8;
  nn::GPT whole(o);
  std::vector<std::shared_ptr<nn::GPT>> parts;
  for (nn::GptRange r : {nn::GptRange{0, 1}, nn::GptRange{3, 4}}) {
    nn::GptOptions p = o;
    p.range = r;
    parts.push_back(std::make_shared<nn::GPT>(p));
  }
  GptChunks chunks(parts);
  std::vector<std::string> names;
  for (const auto& [name, t] : chunks.named_parameters()) names.push_back(name);
  std::vector<std::string> expected;
  for (const auto& [name, t] : whole.named_parameters())
    if (name.rfind("blocks.1.", 0) != 0 && name.rfind("blocks.2.", 0) != 0)
      expected.push_back(name);
  EXPECT_EQ(names, expected);
  EXPECT_THROW(chunks.forward(Tensor()), InvalidArgument);
}

}  // namespace
}  // namespace cohort::parallel
