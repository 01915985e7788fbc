// Module machinery, layers, initialisation and dropout (models: nn_models_test.cc).
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {
namespace {

std::vector<std::string> names_of(const NamedTensors& nt) {
  std::vector<std::string> out;
  for (auto& [n, t] : nt) out.push_back(n);
  return out;
}

// Throws E and the message contains every one of `parts`.
template <typename E, typename Fn>
void expect_error(Fn fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    std::string msg = e.what();
    for (auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// A two-level model to test naming: own parameter first, then children in order.
class Toy : public Module {
 public:
  Toy() {
    scale_ = register_parameter("scale", ones({3}), Init::ones());
    register_buffer("count", zeros({1}));
    auto body = register_module("body", std::make_shared<Sequential>());
    body->push_back(std::make_shared<Linear>(3, 4));
    body->push_back(std::make_shared<ReLU>());
    body->push_back(std::make_shared<Linear>(4, 2, LinearOptions{.bias = false}));
    drop_ = register_module("drop", std::make_shared<Dropout>(0.5));
  }
  std::string type_name() const override { return "Toy"; }
  Tensor scale_;
  std::shared_ptr<Dropout> drop_;
};

TEST(Module, NamesNestInRegistrationOrder) {
  Toy toy;
  EXPECT_EQ(names_of(toy.named_parameters()),
            (std::vector<std::string>{"scale", "body.0.weight", "body.0.bias", "body.2.weight"}));
  // The dropout's call counter is module state too (see Dropout).
  EXPECT_EQ(names_of(toy.named_buffers()), (std::vector<std::string>{"count", "drop.rng_counter"}));
  EXPECT_EQ(toy.num_parameters(), 3 + 12 + 4 + 8);
  std::vector<std::string> mods;
  for (auto& [n, m] : toy.named_modules()) mods.push_back(n);
  EXPECT_EQ(mods, (std::vector<std::string>{"", "body", "body.0", "body.1", "body.2", "drop"}));
  for (auto& p : toy.parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  EXPECT_EQ(toy.state_dict().size(), 6u);  // parameters and the buffers
}

TEST(Module, RejectsBadOrDuplicateNames) {
  class Bad : public Module {
   public:
    std::string type_name() const override { return "Bad"; }
    void add(const std::string& n) { register_parameter(n, zeros({1})); }
  } bad;
  bad.add("w");
  expect_error<InvalidArgument>([&] { bad.add("w"); }, {"Bad", "'w'", "already registered"});
  expect_error<InvalidArgument>([&] { bad.add("a.b"); }, {"invalid member name 'a.b'"});
  expect_error<InvalidArgument>([&] { bad.param("nope"); }, {"no parameter named 'nope'"});
  expect_error<InvalidArgument>([&] { bad.forward(zeros({1})); }, {"Bad has no forward"});
}

TEST(Module, TrainEvalPropagatesToChildren) {
  Toy toy;
  EXPECT_TRUE(toy.is_training());
  toy.eval();
  for (auto& [n, m] : toy.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  toy.train();
  for (auto& [n, m] : toy.named_modules()) EXPECT_TRUE(m->is_training()) << n;
}

TEST(Init, LinearAndConvMatchPyTorchDefaultsAndNamedSeeds) {
  Linear lin(50, 30, {.seed = 9});
  double bound = 1.0 / std::sqrt(50.0);
  // The contract: values are uniform(-b, b) drawn with seed derive_seed(seed, name).
  EXPECT_EQ(lin.weight().to_vector<float>(),
            uniform({30, 50}, -bound, bound, derive_seed(9, "weight")).to_vector<float>());
  EXPECT_EQ(lin.bias().to_vector<float>(),
            uniform({30}, -bound, bound, derive_seed(9, "bias")).to_vector<float>());
  std::vector<float> w = lin.weight().to_vector<float>();
  double mn = 1, mx = -1, sum = 0, sq = 0;
  for (float v : w)
    mn = std::min(mn, double(v)), mx = std::max(mx, double(v)), sum += v, sq += v * v;
  EXPECT_GE(mn, -bound);
  EXPECT_LE(mx, bound);
  EXPECT_LT(mn, -0.95 * bound);  // actually spans the interval
  EXPECT_GT(mx, 0.95 * bound);
  EXPECT_NEAR(sum / w.size(), 0.0, 0.1 * bound);
  EXPECT_NEAR(std::sqrt(sq / w.size()), bound / std::sqrt(3.0), 0.05 * bound);  // U std

  Conv2d conv(8, 4, 3, {.seed = 1});
  double cb = 1.0 / std::sqrt(8.0 * 3 * 3);  // fan_in = C * K * K
  for (float v : conv.weight().to_vector<float>()) ASSERT_LE(std::abs(v), cb);
  for (float v : conv.bias().to_vector<float>()) ASSERT_LE(std::abs(v), cb);
  EXPECT_EQ(conv.weight().shape(), (Shape{4, 8, 3, 3}));

  LayerNorm ln(6);
  EXPECT_EQ(ln.weight().to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(ln.bias().to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(Init, ModelSeedDeterminesEveryParameterIndependentOfThreads) {
  auto values = [](uint64_t seed, int threads) {
    set_num_threads(threads);
    MLP m({64, 300, 10}, {.seed = seed});
    std::vector<std::vector<float>> out;
    for (auto& [n, t] : m.named_parameters()) out.push_back(t.to_vector<float>());
    return out;
  };
  auto a = values(5, 1);
  EXPECT_EQ(a, values(5, 2));  // thread count does not matter
  EXPECT_EQ(a, values(5, 1));
  auto b = values(6, 1);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << "parameter " << i;
  set_num_threads(0);
  // A parameter's seed is the model seed with its full name.
  MLP m({64, 300, 10}, {.seed = 5});
  double b1 = 1.0 / std::sqrt(300.0);
  auto params = m.named_parameters();
  ASSERT_EQ(params[2].first, "layers.1.weight");
  EXPECT_EQ(params[2].second.to_vector<float>(),
            uniform({10, 300}, -b1, b1, derive_seed(5, "layers.1.weight")).to_vector<float>());
}

TEST(Init, ResetParametersRefillsInPlace) {
  MLP m({4, 3, 2}, {.seed = 1});
  Tensor w = m.parameters()[0];
  const void* storage = w.raw_data();
  std::vector<float> before = w.to_vector<float>();
  m.reset_parameters(2);
  EXPECT_EQ(w.raw_data(), storage);  // same tensor: optimizer handles stay valid
  EXPECT_NE(w.to_vector<float>(), before);
  m.reset_parameters(1);
  EXPECT_EQ(w.to_vector<float>(), before);
}

TEST(Dropout, TrainingMasksEvalIsIdentity) {
  Dropout d(0.5, 42);
  Tensor x = ones({1000});
  std::vector<float> y = d(x).to_vector<float>();
  int zeros_seen = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || v == 2.0f) << v;  // kept elements scale by 1 / (1 - p)
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  EXPECT_EQ(d.counter(), 1u);
  EXPECT_NE(d(x).to_vector<float>(), y);  // the next call draws a new mask
  d.set_counter(0);
  EXPECT_EQ(d(x).to_vector<float>(), y);  // a restored counter replays it
  d.eval();
  EXPECT_TRUE(d(x).same(x));
  EXPECT_EQ(d.counter(), 1u);  // eval does not consume masks
  Dropout none(0.0);
  EXPECT_TRUE(none(x).same(x));
  EXPECT_THROW(Dropout(1.0), InvalidArgument);
}

TEST(Dropout, CountersByModuleName) {
  Toy toy;
  Tensor x = ones({64});
  (*toy.drop_)(x);
  (*toy.drop_)(x);
  EXPECT_EQ(dropout_counters(toy), (std::map<std::string, uint64_t>{{"drop", 2}}));
  set_dropout_counters(toy, {{"drop", 7}});
  EXPECT_EQ(toy.drop_->counter(), 7u);
  expect_error<InvalidArgument>(
      [&] {
        set_dropout_counters(toy, {{"body.1", 1}});
      },
      {"'body.1' is not a Dropout"});
  reseed_dropouts(toy, 3);  // each site gets a seed from the model seed and its name
  EXPECT_EQ(toy.drop_->counter(), 0u);
  EXPECT_EQ(toy.drop_->seed(), derive_seed(3, "dropout:drop"));
}

TEST(StateDict, RoundTripAndClearErrors) {
  MLP a({6, 5, 3}, {.seed = 1}), b({6, 5, 3}, {.seed = 2});
  Tensor x = randn({4, 6}, 3);
  EXPECT_NE(a(x).to_vector<float>(), b(x).to_vector<float>());
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a(x).to_vector<float>(), b(x).to_vector<float>());

  MLP c({6, 5, 3}, {.seed = 4});
  std::vector<float> before = c.parameters()[0].to_vector<float>();
  StateDict sd = a.state_dict();
  sd.erase("layers.1.bias");
  sd["layers.0.weight"] = zeros({5, 7});
  sd["extra.weight"] = zeros({1});
  expect_error<InvalidArgument>(
      [&] { c.load_state_dict(sd); },
      {"MLP", "nothing was loaded", "missing (1): layers.1.bias", "unexpected (1): extra.weight",
       "layers.0.weight (model [5, 6], dict [5, 7])"});
  EXPECT_EQ(c.parameters()[0].to_vector<float>(), before);  // all-or-nothing
  sd = a.state_dict();
  sd.erase("layers.1.bias");
  sd["extra.weight"] = zeros({1});
  c.load_state_dict(sd, {.strict = false});  // missing/unexpected tolerated, the rest loaded
  EXPECT_EQ(c.parameters()[0].to_vector<float>(), a.parameters()[0].to_vector<float>());
}

TEST(Layers, ShapeErrorsNameTheLayerAndShapes) {
  Linear lin(784, 512);
  expect_error<InvalidArgument>(
      [&] {
        lin(zeros({64, 783}));
      },
      {"Linear(784 -> 512)", "[64, 783]", "784"});
  Conv2d conv(1, 32, 3);
  expect_error<InvalidArgument>(
      [&] {
        conv(zeros({2, 3, 28, 28}));
      },
      {"Conv2d(1 -> 32", "[2, 3, 28, 28]"});
  Embedding emb(10, 4);
  expect_error<InvalidArgument>([&] { emb(zeros({3})); }, {"Embedding(10, 4)", "int64"});
  EXPECT_THROW(emb(from_vector_i64({0, 10}, {2})), InvalidArgument);  // index out of range
  LayerNorm ln(8);
  expect_error<InvalidArgument>([&] { ln(zeros({2, 7})); }, {"LayerNorm(8)", "[2, 7]"});
}

TEST(Layers, ForwardMatchesOps) {
  Linear lin(3, 2, {.seed = 7});
  Tensor x = randn({4, 3}, 1);
  EXPECT_EQ(lin(x).to_vector<float>(), ops::linear(x, lin.weight(), lin.bias()).to_vector<float>());
  Sequential seq({std::make_shared<Linear>(3, 5), std::make_shared<ReLU>(),
                  std::make_shared<GELU>(), std::make_shared<Flatten>()});
  EXPECT_EQ(seq.size(), 4u);
  Tensor h = ops::gelu(ops::relu(static_cast<Linear&>(seq[0])(x)));
  EXPECT_EQ(seq(x).to_vector<float>(), h.to_vector<float>());
  EXPECT_THROW(seq[4], InvalidArgument);
  MaxPool2d pool(2);
  EXPECT_EQ(pool(zeros({1, 2, 6, 6})).shape(), (Shape{1, 2, 3, 3}));
  Flatten flat;
  EXPECT_EQ(flat(zeros({2, 3, 4, 5})).shape(), (Shape{2, 60}));
}

TEST(Module, ZeroGradModes) {
  Linear lin(3, 2);
  ops::sum(lin(ones({1, 3}))).backward();
  ASSERT_TRUE(lin.weight().grad().defined());
  Tensor g = lin.weight().grad();
  lin.zero_grad(ZeroGrad::kFillZero);
  EXPECT_TRUE(lin.weight().grad().same(g));
  EXPECT_EQ(g.to_vector<float>(), std::vector<float>(6, 0.0f));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight().grad().defined());
}

}  // namespace
}  // namespace cohort::nn
