// The GPT built from TensorParallelLayers against the same GPT in one process: initial state,
// losses and gradients of a few SGD steps, per-rank parameter bytes, checkpoint round trips,
// and the option errors.
#include <gtest/gtest.h>

#include "cohort/nn/models/gpt.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/tensor/tensor_parallel.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/tp_test_util.h"

namespace cohort::parallel {
namespace {

using testing::bit_equal;
using testing::rel_diff;
using testing::run_world;

constexpr int kSteps = 3;

nn::GptOptions small_gpt(double dropout) {
  return {.vocab_size = 256,
          .n_layer = 2,
          .n_head = 4,
          .n_embd = 32,
          .block_size = 16,
          .dropout = dropout,
          .seed = 3};
}

Tensor tokens(uint64_t seed) {
  std::vector<int64_t> v;
  for (uint64_t i = 0; i < 2 * 16; ++i) v.push_back(int64_t((seed * 131 + i * 37 + i * i) % 256));
  return from_vector_i64(v, {2, 16});
}

// What the single-process GPT does: its initial state, and per step the loss and gradients.
struct Reference {
  nn::StateDict initial;
  std::vector<float> losses;
  std::vector<nn::StateDict> grads;
  nn::StateDict final_state;
};

nn::StateDict snapshot(const nn::NamedTensors& named) {
  nn::StateDict out;
  for (const auto& [name, t] : named) out[name] = t.clone_raw();
  return out;
}

nn::NamedTensors grads_of(const nn::Module& m) {
  nn::NamedTensors out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace_back(name, p.grad());
  return out;
}

Reference reference(const nn::GptOptions& o) {
  nn::GPT gpt(o);
  Reference ref;
  const nn::StateDict state = gpt.state_dict();
  ref.initial = snapshot(nn::NamedTensors(state.begin(), state.end()));
  optim::SGD opt(gpt.named_parameters(), {.lr = 0.5});
  for (int s = 0; s < kSteps; ++s) {
    Tensor loss = gpt.layers().cross_entropy(gpt(tokens(s)), tokens(s + 100));
    opt.zero_grad();
    loss.backward();
    ref.losses.push_back(loss.item<float>());
    ref.grads.push_back(snapshot(grads_of(gpt)));
    opt.step();
  }
  ref.final_state = snapshot(gpt.named_parameters());
  return ref;
}

// "" or the first parameter further than tol from the reference.
std::string compare(const nn::StateDict& got, const nn::StateDict& want, double tol) {
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) return "missing " + name;
    if (t.dtype() != DType::f32) continue;  // dropout counters: compared elsewhere
    double d = rel_diff(it->second, t);
    if (tol == 0 ? !bit_equal(it->second, t) : d > tol)
      return name + ": relative difference " + std::to_string(d);
  }
  return got.size() == want.size() ? "" : "different names";
}

struct GptCase {
  int shards;
  double dropout;
};
class TpGpt : public ::testing::TestWithParam<GptCase> {};

TEST_P(TpGpt, MatchesTheSingleProcessGpt) {
  const auto [c, dropout] = GetParam();
  const nn::GptOptions o = small_gpt(dropout);
  const Reference ref = reference(o);
  run_world(c, [&](int r, testing::PG g) {
    nn::GptOptions to = o;
    to.layers = std::make_shared<TensorParallelLayers>(g);
    nn::GPT gpt(to);
    EXPECT_EQ(compare(gather_full_state(gpt, *g), ref.initial, 0), "");
    optim::SGD opt(gpt.named_parameters(), {.lr = 0.5});
    for (int s = 0; s < kSteps; ++s) {
      Tensor loss = gpt.layers().cross_entropy(gpt(tokens(s)), tokens(s + 100));
      opt.zero_grad();
      loss.backward();
      EXPECT_LT(std::abs(loss.item<float>() - ref.losses[size_t(s)]),
                1e-5 * std::abs(ref.losses[size_t(s)]))
          << "step " << s;
      EXPECT_EQ(compare(gather_full(grads_of(gpt), gpt, *g), ref.grads[size_t(s)], 1e-4), "")
          << "step " << s;
      opt.step();
    }
    nn::StateDict after = gather_full(gpt.named_parameters(), gpt, *g);
    EXPECT_EQ(compare(after, ref.final_state, 1e-5), "");
  });
}

TEST_P(TpGpt, ShardedBytesAreOneOverShardsOfTheUnsharded) {
  const int c = GetParam().shards;
  nn::GPT whole(small_gpt(0));
  run_world(c, [&](int r, testing::PG g) {
    nn::GptOptions to = small_gpt(0);
    to.layers = std::make_shared<TensorParallelLayers>(g);
    nn::GPT gpt(to);
    const auto specs = gpt.shard_specs();
    // wte and lm_head; per block qkv and fc weight and bias, the two proj weights.
    EXPECT_EQ(specs.size(), 2u + 2u * 6u);
    int64_t unsharded = 0;
    for (const auto& [name, t] : whole.named_parameters())
      if (specs.count(name)) unsharded += int64_t(t.nbytes());
    EXPECT_EQ(sharded_parameter_bytes(gpt) * c, unsharded);
  });
}

TEST_P(TpGpt, FullStateLoadsIntoShardsAndGathersBack) {
  const int c = GetParam().shards;
  nn::GPT whole(small_gpt(0));
  const nn::StateDict full = whole.state_dict();
  run_world(c, [&](int r, testing::PG g) {
    nn::GptOptions to = small_gpt(0);
    to.seed = 77;  // different values until loaded
    to.layers = std::make_shared<TensorParallelLayers>(g);
    nn::GPT gpt(to);
    load_full_state(gpt, full);
    EXPECT_EQ(compare(gather_full_state(gpt, *g), full, 0), "");
    nn::StateDict bad = full;
    bad["lm_head.weight"] = zeros({256, 16});
    try {
      load_full_state(gpt, bad);
      ADD_FAILURE() << "a wrong shape must be rejected";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
    }
    bad.erase("blocks.1.mlp.fc.weight");
    bad["lm_head.weight"] = full.at("lm_head.weight");
    EXPECT_THROW(load_full_state(gpt, bad), InvalidArgument);
  });
}

INSTANTIATE_TEST_SUITE_P(Shards, TpGpt,
                         ::testing::Values(GptCase{2, 0.0}, GptCase{4, 0.0}, GptCase{2, 0.1},
                                           GptCase{4, 0.1}),
                         [](const auto& info) {
                           return "c" + std::to_string(info.param.shards) +
                                  (info.param.dropout > 0 ? "_dropout" : "");
                         });

TEST(TpGptErrors, ShardsMustDivideHeadsEmbeddingAndVocabulary) {
  run_world(3, [&](int r, testing::PG g) {
    nn::GptOptions o = small_gpt(0);
    o.n_head = 4;
    o.n_embd = 36;  // 3 divides it, not n_head 4 nor vocab 256
    o.layers = std::make_shared<TensorParallelLayers>(g);
    try {
      nn::GPT gpt(o);
      ADD_FAILURE() << "3 shards of 4 heads must be rejected";
    } catch (const InvalidArgument& e) {
      std::string m = e.what();
      for (const char* want :
           {"3 tensor-parallel shards", "n_head (4)", "n_embd (36)", "vocab_size (256)"})
        EXPECT_NE(m.find(want), std::string::npos) << m;
    }
  });
}

}  // namespace
}  // namespace cohort::parallel
