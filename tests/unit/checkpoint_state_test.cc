// The dropout call counters are module state: "<module>.rng_counter" buffers that state_dict and
// load_state_dict (and so checkpoints) carry. A checkpoint written before that kept them in
// state.json ("dropout_counters"); train/'s checkpoint_model_state puts them back.
#include <gtest/gtest.h>

#include "cohort/nn/layers.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/train/checkpointing.h"

namespace cohort::train {
namespace {

nn::GptOptions tiny_gpt_with_dropout() {
  return {.vocab_size = 256,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 16,
          .block_size = 8,
          .dropout = 0.2,
          .seed = 5};
}

Tensor tokens() {
  return from_vector_i64({3, 1, 4, 1, 5, 9}, {1, 6});
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(DropoutState, CountersAreBuffersInTheStateDict) {
  nn::GPT m(tiny_gpt_with_dropout());
  m(tokens());
  m(tokens());
  nn::StateDict sd = m.state_dict();
  std::map<std::string, uint64_t> counters = nn::dropout_counters(m);
  ASSERT_EQ(counters.size(), 1u + 2 * 2);
  for (auto& [module, n] : counters) {
    EXPECT_EQ(n, 2u) << module;
    const Tensor& t = sd.at(module + ".rng_counter");
    EXPECT_EQ(t.dtype(), DType::i64);
    EXPECT_EQ(t.dim(), 0);
    EXPECT_EQ(t.item<int64_t>(), 2);
  }
  // Loading the state dict restores the counters, so the next masks are the same.
  nn::GPT resumed(tiny_gpt_with_dropout());
  resumed.load_state_dict(sd);
  EXPECT_EQ(nn::dropout_counters(resumed), counters);
  EXPECT_EQ(resumed(tokens()).to_vector<float>(), m(tokens()).to_vector<float>());
}

TEST(DropoutState, ACheckpointFromBeforeKeepsItsCountersFromStateJson) {
  nn::GPT m(tiny_gpt_with_dropout());
  m(tokens());
  ckpt::CheckpointData old;  // as written before: no counters in the model file
  old.step = 7;
  for (auto& [name, t] : m.state_dict())
    if (!ends_with(name, ".rng_counter")) old.model.emplace_back(name, t.clone_raw());
  old.state = nlohmann::json{{"dropout_counters", nn::dropout_counters(m)}};
  nn::GPT resumed(tiny_gpt_with_dropout());
  resumed.load_state_dict(checkpoint_model_state(old));
  EXPECT_EQ(nn::dropout_counters(resumed), nn::dropout_counters(m));
  EXPECT_EQ(resumed(tokens()).to_vector<float>(), m(tokens()).to_vector<float>());

  // A current checkpoint passes through as it is.
  nn::StateDict sd = m.state_dict();
  ckpt::CheckpointData now;
  now.model.assign(sd.begin(), sd.end());
  now.state = nlohmann::json::object();
  EXPECT_EQ(checkpoint_model_state(now).size(), sd.size());

  // Neither: strict loading refuses it, naming the missing counters.
  old.state = nlohmann::json::object();
  try {
    nn::GPT fresh(tiny_gpt_with_dropout());
    fresh.load_state_dict(checkpoint_model_state(old));
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("drop.rng_counter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort::train
