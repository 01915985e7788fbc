// model.type = "sequential": the layer list's syntax, shape inference, torch.nn.Sequential's
// names, the layers it adds (batch norm, average pooling, residual, positions) computed by hand,
// and the error each mistake gets.
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/nn/blocks.h"
#include "cohort/nn/layer_spec.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/sequential.h"
#include "tests/unit/data_test_util.h"

namespace cohort::nn {
namespace {

using data::expect_error;

std::shared_ptr<Sequential> build(const std::string& layers, Shape shape, int64_t classes = 10,
                                  bool tokens = false) {
  return make_sequential({.layers = layers,
                          .input = {.sample_shape = shape, .tokens = tokens, .classes = classes},
                          .seed = 7});
}

std::vector<std::pair<std::string, Shape>> names_and_shapes(const Module& m) {
  std::vector<std::pair<std::string, Shape>> out;
  for (auto& [n, t] : m.state_dict()) out.emplace_back(n, t.shape());
  return out;
}

TEST(LayerList, SplitsOnLinesAndSemicolonsAndNestsResidualBlocks) {
  auto specs = parse_layer_list(
      "conv2d 32 kernel=3  # a comment\n\n relu; residual\nlinear 4; end; Linear", "m");
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].type, "conv2d");
  EXPECT_EQ(specs[0].positional, (std::vector<std::string>{"32"}));
  EXPECT_EQ(specs[0].options.at("kernel"), "3");
  EXPECT_EQ(specs[2].type, "residual");
  ASSERT_EQ(specs[2].body.size(), 1u);
  EXPECT_EQ(specs[2].body[0].index, 4);
  EXPECT_EQ(specs[3].type, "linear");  // lower-cased
  EXPECT_EQ(specs[3].index, 6);
}

TEST(LayerList, SyntaxErrorsNameTheLayer) {
  auto parse = [](const char* t) { return [t] { parse_layer_list(t, "model.layers"); }; };
  expect_error<InvalidArgument>(parse("relu; end"),
                                {"model.layers", "layer 2 (`end`)", "without a `residual`"});
  expect_error<InvalidArgument>(parse("residual; relu"),
                                {"layer 1 (`residual`)", "needs an `end`"});
  expect_error<InvalidArgument>(parse("conv2d kernel=3 32"), {"layer 1", "after key=value"});
  expect_error<InvalidArgument>(parse("linear out= 3"), {"`out=`", "neither side empty"});
  expect_error<InvalidArgument>(parse("linear out=3 out=4"), {"`out` is given twice"});
  expect_error<InvalidArgument>(parse(" ; # nothing"), {"the layer list is empty"});
}

TEST(SequentialModel, InfersShapesAndNamesLikeTorchSequential) {
  auto m = build(
      "conv2d 8 kernel=3 padding=1; batchnorm; relu; maxpool 2; flatten; linear 16; "
      "relu; dropout 0.1; linear",
      {3, 8, 8});
  using P = std::vector<std::pair<std::string, Shape>>;
  EXPECT_EQ(names_and_shapes(*m), (P{{"0.bias", {8}},
                                     {"0.weight", {8, 3, 3, 3}},
                                     {"1.bias", {8}},
                                     {"1.num_batches_tracked", {}},
                                     {"1.running_mean", {8}},
                                     {"1.running_var", {8}},
                                     {"1.weight", {8}},
                                     {"5.bias", {16}},
                                     {"5.weight", {16, 128}},  // 8 channels x 4 x 4 after the pool
                                     {"7.rng_counter", {}},
                                     {"8.bias", {10}},
                                     {"8.weight", {10, 16}}}));
  EXPECT_EQ((*m)(randn({2, 3, 8, 8}, 1)).shape(), (Shape{2, 10}));
}

TEST(SequentialModel, TheSameSeedGivesTheSameWeightsAndAnotherDiffers) {
  const char* list = "flatten; linear 8; relu; linear";
  auto a = build(list, {4}), b = build(list, {4});
  auto c = make_sequential({.layers = list, .input = {{4}, false, 10}, .seed = 8});
  const std::string w = "1.weight";
  EXPECT_EQ(a->state_dict().at(w).to_vector<float>(), b->state_dict().at(w).to_vector<float>());
  EXPECT_NE(a->state_dict().at(w).to_vector<float>(), c->state_dict().at(w).to_vector<float>());
}

TEST(SequentialModel, ResidualAddsItsInput) {
  auto m = build("linear 6; residual; linear 6 bias=false; end; linear", {5});
  Tensor x = randn({3, 5}, 2);
  Tensor h = (*m)[0](x);
  Tensor body = dynamic_cast<Sequential&>((*m)[1])[0](h);  // the block's linear
  Tensor want = (*m)[2](ops::add(h, body));
  EXPECT_EQ((*m)(x).to_vector<float>(), want.to_vector<float>());
}

TEST(SequentialModel, BatchNormUsesBatchStatisticsThenRunningOnes) {
  BatchNorm bn(2);
  // Channel 0 holds 1, 2, 3, 4; channel 1 holds 10, 10, 30, 30 (N = 4, [N, C]).
  Tensor x = from_vector({1, 10, 2, 10, 3, 30, 4, 30}, {4, 2});
  std::vector<float> y = bn(x).to_vector<float>();
  // Batch mean 2.5, biased variance 1.25 for channel 0: (1 - 2.5) / sqrt(1.25 + 1e-5).
  EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-6);
  EXPECT_NEAR(y[1], -10.0 / std::sqrt(100.0 + 1e-5), 1e-6);
  // Running statistics: 0.9 * initial + 0.1 * batch, the variance unbiased (x 4/3).
  EXPECT_NEAR(bn.buffer("running_mean").to_vector<float>()[0], 0.25, 1e-6);
  EXPECT_NEAR(bn.buffer("running_var").to_vector<float>()[0], 0.9 + 0.1 * 1.25 * 4 / 3, 1e-6);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 1);
  bn.eval();
  std::vector<float> e = bn(x).to_vector<float>();
  const double rv = 0.9 + 0.1 * 1.25 * 4 / 3;
  EXPECT_NEAR(e[0], (1 - 0.25) / std::sqrt(rv + 1e-5), 1e-6);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 1);  // eval does not count
}

TEST(SequentialModel, BatchNormGradientFlowsThroughTheBatchStatistics) {
  BatchNorm bn(3);
  Tensor x = randn({4, 3, 2, 2}, 3);
  x.set_requires_grad(true);
  // The sum of a normalised channel is 0 whatever x is, so its gradient is 0 (the batch mean
  // is part of the graph).
  ops::sum(bn(x)).backward();
  for (float g : x.grad().to_vector<float>()) EXPECT_NEAR(g, 0.0f, 1e-5f);
}

TEST(SequentialModel, AvgPoolAveragesWholeWindowsAndDropsTheRest) {
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[i] = float(i);  // 5x5, row-major
  Tensor y = AvgPool2d(2)(from_vector(v, {1, 1, 5, 5}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 5, 13, 15}));  // (0+1+5+6)/4 ...
  Tensor g = GlobalAvgPool2d()(from_vector(v, {1, 1, 5, 5}));
  EXPECT_EQ(g.shape(), (Shape{1, 1, 1, 1}));
  EXPECT_FLOAT_EQ(g.to_vector<float>()[0], 12.0f);
}

TEST(SequentialModel, ALanguageModelFromTokensTrains) {
  auto m = build(
      "embedding 16; positions; residual; layernorm; attention 2; end; "
      "residual; layernorm; linear 32; gelu; linear 16; end; layernorm; linear",
      {8}, 256, true);
  Tensor idx = from_vector_i64(std::vector<int64_t>(16, 65), {2, 8});
  Tensor logits = (*m)(idx);
  EXPECT_EQ(logits.shape(), (Shape{2, 8, 256}));
  cross_entropy(logits, idx).backward();
  for (auto& [name, p] : m->named_parameters())
    EXPECT_TRUE(p.grad().defined()) << name << " got no gradient";
  EXPECT_EQ(m->named_parameters().front().first, "0.weight");
}

TEST(SequentialModel, ShapeMistakesNameTheLayerTheShapeAndTheFix) {
  auto bad = [](std::string layers, Shape s, bool tokens = false) {
    return [=] { build(layers, s, 10, tokens); };
  };
  expect_error<InvalidArgument>(bad("conv2d 4 kernel=3; linear", {1, 8, 8}),
                                {"layer 2 (`linear`)", "gets [4, 6, 6]", "add `flatten`"});
  expect_error<InvalidArgument>(bad("conv2d 4 kernel=3; flatten; linear", {64}),
                                {"layer 1", "gets [64]", "images [C, H, W]", "data.shape"});
  expect_error<InvalidArgument>(bad("conv2d 4 kernel=9; flatten; linear", {1, 8, 8}),
                                {"window of 9"});
  expect_error<InvalidArgument>(bad("conv2d 4; flatten; linear", {1, 8, 8}), {"needs `kernel`"});
  expect_error<InvalidArgument>(bad("linear 0; linear", {4}), {"`out` must be an integer >= 1"});
  expect_error<InvalidArgument>(bad("linear 8 pad=1; linear", {4}),
                                {"no option `pad`", "it takes out, bias"});
  expect_error<InvalidArgument>(bad("dropout 1.5; linear", {4}), {"`p` must be a number in [0"});
  expect_error<InvalidArgument>(bad("conv 4 kernel=3", {1, 8, 8}),
                                {"unknown layer type `conv`", "did you mean `conv2d`"});
  expect_error<InvalidArgument>(bad("linear 5; residual; linear 3; end; linear", {4}),
                                {"layer 2 (`residual`)", "turns [5] into [3]"});
  expect_error<InvalidArgument>(bad("linear 8", {4}),
                                {"the last layer gives [8]", "needs [10]", "end with `linear`"});
  expect_error<InvalidArgument>(bad("conv2d 4 kernel=3", {1, 8, 8}),
                                {"gives [4, 6, 6]", ", after `flatten`"});
  expect_error<InvalidArgument>(bad("linear", {8}, true),
                                {"token ids", "through `embedding` first"});
  expect_error<InvalidArgument>(bad("embedding 8; attention 3; linear", {8}, true),
                                {"width 8 divisible by heads 3"});
}

}  // namespace
}  // namespace cohort::nn
