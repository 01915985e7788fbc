// The reference models: names, sizes, initialisation, shape checks, and that they train.
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"

namespace cohort::nn {
namespace {

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (auto& [n, t] : m.named_parameters()) out.push_back(n);
  return out;
}

double std_of(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  double s = 0, sq = 0;
  for (float x : v) s += x, sq += double(x) * x;
  double mean = s / v.size();
  return std::sqrt(sq / v.size() - mean * mean);
}

GptOptions tiny_gpt() {
  return {.vocab_size = 256, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8};
}

TEST(MLP, NamesShapesAndCount) {
  MLP m({784, 512, 256, 10});
  EXPECT_EQ(names_of(m),
            (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                      "layers.1.bias", "layers.2.weight", "layers.2.bias"}));
  EXPECT_EQ(m.parameters()[0].shape(), (Shape{512, 784}));
  EXPECT_EQ(m.num_parameters(), 535818);  // 784*512+512 + 512*256+256 + 256*10+10
}

TEST(MLP, AcceptsImagesAndChecksFeatures) {
  MLP m({784, 16, 10}, {.seed = 1});
  Tensor img = randn({3, 1, 28, 28}, 2);
  Tensor y = m(img);
  EXPECT_EQ(y.shape(), (Shape{3, 10}));
  EXPECT_EQ(y.to_vector<float>(), m(img.reshape({3, 784})).to_vector<float>());
  try {
    m(zeros({3, 1, 28, 27}));
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(
        std::string(e.what()).find("[3, 1, 28, 27] has 756 features per sample, expected 784"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MLP({784}), InvalidArgument);
}

TEST(MLP, OverfitsASmallBatch) {
  MLP m({8, 32, 4}, {.seed = 3});
  Tensor x = randn({16, 8}, 4);
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 4);
  Tensor y = from_vector_i64(labels, {16});
  optim::SGD opt(m.parameters(), {.lr = 0.1, .momentum = 0.9});
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    Tensor loss = cross_entropy(m(x), y);
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_NEAR(first, std::log(4.0), 0.5);  // small init: near-uniform predictions
  EXPECT_LT(last, 0.05);
}

TEST(CNN, LayersNamesAndCount) {
  CNN m;
  EXPECT_EQ(names_of(m),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  // conv1 32*1*9+32 = 320, conv2 64*32*9+64 = 18,496, fc1 1600*128+128 = 204,928,
  // fc2 128*10+10 = 1,290.
  EXPECT_EQ(m.num_parameters(), 320 + 18496 + 204928 + 1290);
  EXPECT_EQ(m.num_parameters(), 225034);
  EXPECT_EQ(m.state_dict()["fc1.weight"].shape(), (Shape{128, 1600}));
}

TEST(CNN, ForwardShapesGradientsAndErrors) {
  CNN m({.seed = 2});
  Tensor x = randn({2, 1, 28, 28}, 5);
  Tensor y = m(x);
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_EQ(m(x.reshape({2, 784})).to_vector<float>(), y.to_vector<float>());
  cross_entropy(y, from_vector_i64({1, 7}, {2})).backward();
  for (auto& [n, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
  EXPECT_THROW(m(zeros({2, 3, 28, 28})), InvalidArgument);
  EXPECT_THROW(m(zeros({2, 783})), InvalidArgument);
}

TEST(GPT, NamesOrderAndCount) {
  GPT m(tiny_gpt());
  std::vector<std::string> names = names_of(m);
  std::vector<std::string> head(names.begin(), names.begin() + 16);
  EXPECT_EQ(head,
            (std::vector<std::string>{
                "wte.weight", "wpe.weight", "blocks.0.ln1.weight", "blocks.0.ln1.bias",
                "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight",
                "blocks.0.attn.proj.bias", "blocks.0.ln2.weight", "blocks.0.ln2.bias",
                "blocks.0.mlp.fc.weight", "blocks.0.mlp.fc.bias", "blocks.0.mlp.proj.weight",
                "blocks.0.mlp.proj.bias", "blocks.1.ln1.weight", "blocks.1.ln1.bias"}));
  std::vector<std::string> tail(names.end() - 3, names.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"ln_f.weight", "ln_f.bias", "lm_head.weight"}));
  EXPECT_EQ(names.size(), 2u + 2 * 12 + 3);
  const int64_t V = 256, C = 16, L = 2, T = 8;
  // wte + wpe + blocks (12 C^2 + 13 C each) + ln_f + untied lm_head without bias.
  EXPECT_EQ(m.num_parameters(), V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + V * C);
  EXPECT_EQ(m.state_dict()["blocks.0.attn.qkv.weight"].shape(), (Shape{3 * C, C}));
}

TEST(GPT, InitFollowsGpt2) {
  GptOptions o = tiny_gpt();
  o.n_embd = 64;
  GPT m(o);
  StateDict sd = m.state_dict();
  EXPECT_NEAR(std_of(sd["wte.weight"]), 0.02, 0.001);
  EXPECT_NEAR(std_of(sd["blocks.0.attn.qkv.weight"]), 0.02, 0.001);
  EXPECT_NEAR(std_of(sd["blocks.1.mlp.fc.weight"]), 0.02, 0.001);
  double resid = 0.02 / std::sqrt(2.0 * o.n_layer);
  EXPECT_NEAR(std_of(sd["blocks.0.attn.proj.weight"]), resid, 0.05 * resid);
  EXPECT_NEAR(std_of(sd["blocks.1.mlp.proj.weight"]), resid, 0.05 * resid);
  EXPECT_EQ(sd["blocks.0.attn.qkv.bias"].to_vector<float>(), std::vector<float>(192, 0.0f));
  EXPECT_EQ(sd["ln_f.weight"].to_vector<float>(), std::vector<float>(64, 1.0f));
  GPT same(o), other({.n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = 8, .seed = 1});
  EXPECT_EQ(same.state_dict()["blocks.1.mlp.fc.weight"].to_vector<float>(),
            sd["blocks.1.mlp.fc.weight"].to_vector<float>());
  EXPECT_NE(other.state_dict()["blocks.1.mlp.fc.weight"].to_vector<float>(),
            sd["blocks.1.mlp.fc.weight"].to_vector<float>());
}

TEST(GPT, ForwardIsCausalAndChecksInput) {
  GPT m(tiny_gpt());
  Tensor a = from_vector_i64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor b = from_vector_i64({1, 2, 3, 4, 99, 6, 7, 8, 9, 10}, {2, 5});
  Tensor la = m(a), lb = m(b);
  EXPECT_EQ(la.shape(), (Shape{2, 5, 256}));
  // Changing token 4 of row 0 leaves positions 0..3 (and row 1) untouched.
  EXPECT_EQ(la.slice(1, 0, 4).contiguous().to_vector<float>(),
            lb.slice(1, 0, 4).contiguous().to_vector<float>());
  EXPECT_EQ(la.slice(0, 1, 2).contiguous().to_vector<float>(),
            lb.slice(0, 1, 2).contiguous().to_vector<float>());
  EXPECT_NE(la.slice(1, 4, 5).contiguous().to_vector<float>(),
            lb.slice(1, 4, 5).contiguous().to_vector<float>());
  try {
    m(zeros({1, 9}, DType::i64));
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("T = 9 must be in [1, block_size = 8]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(m(zeros({1, 4})), InvalidArgument);                      // float indices
  EXPECT_THROW(m(from_vector_i64({0, 256}, {1, 2})), InvalidArgument);  // outside the vocab
  EXPECT_THROW(GPT({.n_head = 3, .n_embd = 16}), InvalidArgument);      // 16 % 3 != 0
}

// The head layout must match nanoGPT's: q, k, v = qkv.split(C); head h = columns h*Dh..
TEST(GPT, AttentionMatchesNaiveReference) {
  const int64_t T = 3, C = 4, H = 2, Dh = 2;
  GptOptions o{.n_layer = 1, .n_head = H, .n_embd = C, .block_size = T};
  CausalSelfAttention attn(o);
  attn.reset_parameters(5);  // all U(-1/sqrt(fan_in), ..): non-zero biases too
  StateDict sd = attn.state_dict();
  std::vector<float> x = randn({1, T, C}, 6).to_vector<float>();
  std::vector<float> wq = sd["qkv.weight"].to_vector<float>(),
                     bq = sd["qkv.bias"].to_vector<float>();
  std::vector<float> wp = sd["proj.weight"].to_vector<float>(),
                     bp = sd["proj.bias"].to_vector<float>();
  std::vector<double> qkv(size_t(T * 3 * C)), y(size_t(T * C), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < 3 * C; ++j) {
      double acc = bq[size_t(j)];
      for (int64_t i = 0; i < C; ++i) acc += double(x[size_t(t * C + i)]) * wq[size_t(j * C + i)];
      qkv[size_t(t * 3 * C + j)] = acc;
    }
  auto at = [&](int64_t part, int64_t t, int64_t h, int64_t d) {
    return qkv[size_t(t * 3 * C + part * C + h * Dh + d)];
  };
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> w(size_t(t + 1));
      double mx = -1e300, total = 0;
      for (int64_t s = 0; s <= t; ++s) {
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += at(0, t, h, d) * at(1, s, h, d);
        w[size_t(s)] = dot / std::sqrt(double(Dh));
        mx = std::max(mx, w[size_t(s)]);
      }
      for (double& v : w) total += (v = std::exp(v - mx));
      for (int64_t s = 0; s <= t; ++s)
        for (int64_t d = 0; d < Dh; ++d)
          y[size_t(t * C + h * Dh + d)] += w[size_t(s)] / total * at(2, s, h, d);
    }
  std::vector<float> got = attn(from_vector(x, {1, T, C})).to_vector<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < C; ++j) {
      double want = bp[size_t(j)];
      for (int64_t i = 0; i < C; ++i) want += y[size_t(t * C + i)] * wp[size_t(j * C + i)];
      EXPECT_NEAR(got[size_t(t * C + j)], want, 1e-5) << "t " << t << " j " << j;
    }
}

TEST(GPT, DropoutSitesFollowTrainingMode) {
  GptOptions o = tiny_gpt();
  o.dropout = 0.2;
  GPT m(o);
  Tensor idx = from_vector_i64({3, 1, 4, 1, 5, 9}, {1, 6});
  EXPECT_NE(m(idx).to_vector<float>(), m(idx).to_vector<float>());
  auto counters = dropout_counters(m);
  EXPECT_EQ(counters.size(), 1u + 2 * 2);
  EXPECT_EQ(counters["drop"], 2u);
  EXPECT_EQ(counters["blocks.1.attn.drop"], 2u);
  EXPECT_EQ(counters["blocks.0.mlp.drop"], 2u);
  m.eval();
  EXPECT_EQ(m(idx).to_vector<float>(), m(idx).to_vector<float>());
}

TEST(GPT, TrainsAndEveryParameterGetsAGradient) {
  GPT m(tiny_gpt());
  std::string text = "abcabcabcabcabcabc";
  std::vector<int64_t> in, out;
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 8; ++t) {
      in.push_back(text[size_t(b + t)]);
      out.push_back(text[size_t(b + t + 1)]);
    }
  Tensor x = from_vector_i64(in, {4, 8}), y = from_vector_i64(out, {4, 8});
  optim::AdamW opt(m.named_parameters(), {.lr = 1e-2, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    Tensor loss = cross_entropy(m(x), y);
    (step == 0 ? first : last) = loss.item<float>();
    opt.zero_grad();
    loss.backward();
    if (step == 0) {
      for (auto& [n, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
    }
    opt.step();
  }
  EXPECT_NEAR(first, std::log(256.0), 0.3);
  EXPECT_LT(last, 0.5);
}

TEST(GPT, GenerateIsSeededGreedyMatchesArgmaxAndRestoresMode) {
  GPT m(tiny_gpt());
  std::string a = m.generate("hello world", {.max_new_tokens = 6, .seed = 1});
  EXPECT_EQ(a.size(), 11u + 6);
  EXPECT_EQ(a.substr(0, 11), "hello world");  // longer than block_size: context is cropped
  EXPECT_EQ(a, m.generate("hello world", {.max_new_tokens = 6, .seed = 1}));
  EXPECT_NE(a, m.generate("hello world", {.max_new_tokens = 6, .seed = 2}));
  EXPECT_TRUE(m.is_training());

  std::vector<int64_t> greedy = m.generate_tokens({7, 8}, {.max_new_tokens = 1, .temperature = 0});
  Tensor logits = m(from_vector_i64({7, 8}, {1, 2}));
  std::vector<float> last = logits.slice(1, 1, 2).contiguous().to_vector<float>();
  int64_t best = std::max_element(last.begin(), last.end()) - last.begin();
  EXPECT_EQ(greedy, (std::vector<int64_t>{7, 8, best}));
  EXPECT_EQ(m.generate_tokens({7, 8}, {.max_new_tokens = 1, .top_k = 1, .seed = 9}), greedy);
  EXPECT_THROW(m.generate("", {}), InvalidArgument);
}

}  // namespace
}  // namespace cohort::nn
