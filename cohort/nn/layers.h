#pragma once
// Layers: thin modules over ops/, with PyTorch's names, shapes and default initialisation.
// Each leaf layer initialises itself from `seed` using its local parameter names; a model that
// contains it re-initialises the whole tree from the model seed (Module::reset_parameters).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cohort/nn/module.h"

namespace cohort::nn {

struct LinearOptions {
  bool bias = true;
  uint64_t seed = 0;
};
// x [..., in] -> [..., out]; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions opt = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined when bias = false

 private:
  int64_t in_, out_;
  Tensor weight_, bias_;
};

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
  uint64_t seed = 0;
};
// x [N, C, H, W] -> [N, O, H', W']; weight [O, C, K, K], bias [O]. fan_in = C * K * K.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Conv2dOptions opt = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t in_, out_, kernel_;
  Conv2dOptions opt_;
  Tensor weight_, bias_;
};

// x [N, C, H, W] -> [N, C, (H - k) / stride + 1, ...]; stride 0 means kernel.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }

 private:
  int64_t kernel_, stride_;
};

struct LayerNormOptions {
  double eps = 1e-5;
};
// Normalises the last dim: x [..., D]; weight [D] = 1, bias [D] = 0 at init.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, LayerNormOptions opt = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
};

struct EmbeddingOptions {
  uint64_t seed = 0;
};
// indices int64 [...] -> [..., dim]; weight [num, dim] ~ N(0, 1) as torch.nn.Embedding.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, EmbeddingOptions opt = {});
  Tensor forward(const Tensor& indices) override;
  std::string type_name() const override { return "Embedding"; }
  const Tensor& weight() const { return weight_; }

 private:
  int64_t num_, dim_;
  Tensor weight_;
};

// Zeroes elements with probability p in training mode; identity in eval mode or when p = 0.
// Call k (counting from 0) draws its mask from Philox(derive_seed(seed, k)). The call counter
// is module state, the buffer "rng_counter" (0-d int64; as PyTorch keeps BatchNorm's
// num_batches_tracked), so state_dict()/load_state_dict(), and with them checkpoints, carry it:
// a run that restores it resumes the exact masks.
inline constexpr const char* kDropoutCounterBuffer = "rng_counter";
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  double p() const { return p_; }
  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t seed) { seed_ = seed; }
  // The "rng_counter" buffer: calls in training mode so far.
  uint64_t counter() const;
  void set_counter(uint64_t c);

 private:
  double p_;
  uint64_t seed_;
  Tensor counter_;  // the registered buffer (shares storage with it)
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

// Exact GELU, x * Phi(x), as torch.nn.GELU().
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
};

// Merges dims [start_dim, end_dim] into one: [N, C, H, W] -> [N, C*H*W] by default.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  int64_t start_, end_;
};

// Runs its children in order; they are named "0", "1", ... as in torch.nn.Sequential.
// Built from already-initialised modules: call reset_parameters(seed) on the root afterwards
// for seed-and-name-derived values.
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  // Under a name of its own (a pipeline stage's blocks keep the whole model's numbers).
  void push_back(const std::string& name, std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;
};

// Every Dropout below `root`: its seed becomes derive_seed(seed, full_module_name) and its
// counter 0. Models call it with their seed so each dropout site draws its own masks.
void reseed_dropouts(Module& root, uint64_t seed);
// Call counters of every Dropout below `root`, by full module name: a view of the
// "<name>.rng_counter" buffers (checkpoints save and restore those through state_dict).
std::map<std::string, uint64_t> dropout_counters(const Module& root);
// Sets them; a name that is not a Dropout of this model is InvalidArgument.
void set_dropout_counters(Module& root, const std::map<std::string, uint64_t>& counters);

}  // namespace cohort::nn
