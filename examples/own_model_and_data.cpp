// A model and a data set of one's own, plugged into `cohort train` with no edit to cohort
// itself: this program is the whole cohort CLI plus two registrations (docs/models.md, "Your
// own model in C++"). The model is a residual MLP sized from the data; the data set is two
// interleaved spirals (a classic that a plain linear model cannot separate), generated from
// config keys of its own. Every strategy, checkpoints and metrics work as with built-ins:
//
//   own_model_and_data train examples/fashion_mlp.toml --workers 2
//       --set model.type=residual_mlp --set data.dataset=spirals --set train.epochs=20
//   (one command line)
#include <cmath>

#include "cohort/data/synthetic.h"
#include "cohort/nn/layers.h"
#include "cohort/ops/ops.h"
#include "cohort/train/extensions.h"
#include "tools/cohort/cli.h"

namespace {

using namespace cohort;

// x -> x + fc2(gelu(fc1(norm(x)))), [N, width] throughout.
class Block : public nn::Module {
 public:
  explicit Block(int64_t width) {
    norm_ = register_module("norm", std::make_shared<nn::LayerNorm>(width));
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(width, 2 * width));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(2 * width, width));
  }
  Tensor forward(const Tensor& x) override { return x + (*fc2_)(ops::gelu((*fc1_)((*norm_)(x)))); }
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

// in features -> width -> depth blocks -> classes: the sizes come from the data's inputs.
class ResidualMlp : public nn::Module {
 public:
  ResidualMlp(int64_t in, int64_t classes, int64_t width, int64_t depth, uint64_t seed) {
    stem_ = register_module("stem", std::make_shared<nn::Linear>(in, width));
    blocks_ = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < depth; ++i) blocks_->push_back(std::make_shared<Block>(width));
    head_ = register_module("head", std::make_shared<nn::Linear>(width, classes));
    reset_parameters(seed);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x.dim() == 2 ? x : x.flatten(1);
    return (*head_)((*blocks_)(ops::relu((*stem_)(h))));
  }
  std::string type_name() const override { return "ResidualMlp"; }

 private:
  std::shared_ptr<nn::Linear> stem_, head_;
  std::shared_ptr<nn::Sequential> blocks_;
};

// Two spirals: class c's point t in [0, 1) at radius t, angle 3 pi t + c pi, with noise.
class Spirals final : public data::Dataset {
 public:
  Spirals(int64_t n, float noise, uint64_t seed) : x_(size_t(n) * 2), y_(size_t(n)) {
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    auto uniform = [&] {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      return double(s >> 11) / double(1ull << 53);
    };
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = i % 2;
      const double t = uniform(), a = 3.0 * M_PI * t + double(c) * M_PI;
      x_[size_t(2 * i)] = float(t * std::cos(a) + noise * (uniform() - 0.5));
      x_[size_t(2 * i + 1)] = float(t * std::sin(a) + noise * (uniform() - 0.5));
      y_[size_t(i)] = c;
    }
  }
  int64_t size() const override { return int64_t(y_.size()); }
  data::Batch get_batch(std::span<const int64_t> indices) const override {
    data::check_batch_indices(indices, size(), "spirals");
    const int64_t b = int64_t(indices.size());
    data::Batch out{empty({b, 2}), empty({b}, DType::i64)};
    float* x = out.x.data<float>();
    int64_t* y = out.y.data<int64_t>();
    for (int64_t i = 0; i < b; ++i) {
      x[2 * i] = x_[size_t(2 * indices[size_t(i)])];
      x[2 * i + 1] = x_[size_t(2 * indices[size_t(i)] + 1)];
      y[i] = y_[size_t(indices[size_t(i)])];
    }
    return out;
  }

 private:
  std::vector<float> x_;
  std::vector<int64_t> y_;
};

void register_residual_mlp() {
  train::register_model(
      {.name = "residual_mlp",
       .description = "an MLP of pre-norm residual blocks (examples/own_model_and_data.cpp)",
       .add_keys =
           [](ConfigRegistry& r) {
             r.add({"residual_mlp.width",
                    ConfigType::kInt,
                    int64_t(64),
                    "Block width.",
                    "",
                    {},
                    1.0});
             r.add({"residual_mlp.depth", ConfigType::kInt, int64_t(2), "Blocks.", "", {}, 1.0});
           },
       .make = [](const Config& cfg, const train::ModelInputs& in) -> std::shared_ptr<nn::Module> {
         int64_t features = 1;
         for (int64_t d : in.sample_shape) features *= d;
         return std::make_shared<ResidualMlp>(
             features, in.classes, cfg.get_int("residual_mlp.width"),
             cfg.get_int("residual_mlp.depth"), uint64_t(cfg.get_int("run.seed")));
       }});
}

void register_spirals() {
  train::register_dataset(
      {.name = "spirals",
       .description = "two interleaved spirals in 2-D (examples/own_model_and_data.cpp)",
       .add_keys =
           [](ConfigRegistry& r) {
             r.add({"spirals.samples",
                    ConfigType::kInt,
                    int64_t(4000),
                    "Training points.",
                    "",
                    {},
                    10.0});
             r.add({"spirals.noise",
                    ConfigType::kFloat,
                    0.05,
                    "Noise around each arm.",
                    "",
                    {},
                    0.0});
           },
       .make =
           [](const Config& cfg) {
             const int64_t n = cfg.get_int("spirals.samples");
             const float noise = float(cfg.get_float("spirals.noise"));
             train::DataSplits d;
             d.train = std::make_shared<Spirals>(n, noise, 1);
             d.eval = std::make_shared<Spirals>(n / 4, noise, 2);  // another draw: the test split
             d.eval_name = "test";
             d.inputs = {{2}, 2};
             return d;
           }});
}

}  // namespace

int main(int argc, char** argv) {
  register_residual_mlp();
  register_spirals();
  return cohort::cli::main(argc, argv);
}
