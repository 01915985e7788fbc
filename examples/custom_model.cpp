// A user-defined model trained through cohort's C++ API: a small residual MLP with LayerNorm
// and GELU on Fashion-MNIST, one epoch of AdamW with warmup + cosine, then test accuracy.
//
//   ./build/bin/custom_model [epochs]
#include <cstdio>
#include <cstdlib>

#include "cohort/autograd/node.h"
#include "cohort/data/fashion_mnist.h"
#include "cohort/data/loader.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/schedule.h"

using namespace cohort;

// x -> x + fc2(gelu(fc1(norm(x)))): a pre-norm residual block, shapes [N, width] throughout.
class ResidualBlock : public nn::Module {
 public:
  explicit ResidualBlock(int64_t width) {
    norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(width));
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(width, 2 * width));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(2 * width, width));
  }
  Tensor forward(const Tensor& x) override { return x + (*fc2_)(ops::gelu((*fc1_)((*norm_)(x)))); }
  std::string type_name() const override { return "ResidualBlock"; }

 private:
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

class ResidualMlp : public nn::Module {
 public:
  ResidualMlp(int64_t width, int64_t depth, uint64_t seed) {
    stem_ = register_module("stem", std::make_shared<nn::Linear>(784, width));
    blocks_ = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < depth; ++i) blocks_->push_back(std::make_shared<ResidualBlock>(width));
    head_ = register_module("head", std::make_shared<nn::Linear>(width, 10));
    reset_parameters(seed);  // every parameter from (seed, its name): reproducible
  }
  Tensor forward(const Tensor& x) override {  // x [N, 784] -> logits [N, 10]
    return (*head_)((*blocks_)(ops::relu((*stem_)(x))));
  }
  std::string type_name() const override { return "ResidualMlp"; }

 private:
  std::shared_ptr<nn::Linear> stem_, head_;
  std::shared_ptr<nn::Sequential> blocks_;
};

double test_accuracy(nn::Module& model, const data::FashionMNIST& test) {
  autograd::NoGradGuard no_grad;
  model.eval();
  data::Loader loader(test, {.batch = 1000});
  int64_t correct = 0;
  for (auto& b : loader) {
    auto pred = ops::argmax(model(b.x), 1).to_vector<int64_t>();
    auto y = b.y.to_vector<int64_t>();
    for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
  }
  model.train();
  return double(correct) / double(test.size());
}

int main(int argc, char** argv) try {
  int epochs = argc > 1 ? std::atoi(argv[1]) : 1;
  data::FashionMnistOptions flat{.layout = data::ImageLayout::kFlat};
  auto train = data::FashionMNIST::train(flat);
  auto test = data::FashionMNIST::test(flat);
  ResidualMlp model(/*width=*/256, /*depth=*/2, /*seed=*/0);
  std::printf("ResidualMlp: %ld parameters\n", long(model.num_parameters()));

  data::Loader loader(train, {.batch = 64, .shuffle = true, .seed = 0});
  optim::AdamW opt(model.named_parameters(), {.lr = 2e-3, .weight_decay = 0.05});
  int64_t total = epochs * loader.len();
  optim::WarmupCosineLr schedule({.lr = 2e-3, .warmup_steps = 100, .total_steps = total});

  int64_t step = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.set_epoch(epoch);
    for (auto& batch : loader) {
      Tensor loss = nn::cross_entropy(model(batch.x), batch.y);
      opt.zero_grad();
      loss.backward();
      schedule.apply(opt, step++);
      opt.step();
      if (step % 200 == 0) std::printf("step %ld loss %.4f\n", long(step), loss.item<float>());
    }
    std::printf("epoch %d: test accuracy %.2f%%\n", epoch, 100 * test_accuracy(model, test));
  }
  return 0;
} catch (const cohort::Error& e) {
  std::fprintf(stderr, "custom_model: %s\n", e.what());
  return 1;
}
