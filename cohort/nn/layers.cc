#include "cohort/nn/layers.h"

#include "cohort/core/rng.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions opt)
    : in_(in_features), out_(out_features) {
  COHORT_CHECK_ARG(in_ > 0 && out_ > 0, "Linear: features must be positive, got in ", in_, " out ",
                   out_);
  Init rule = Init::fan_in_uniform(in_);
  weight_ = register_parameter("weight", empty({out_, in_}), rule);
  if (opt.bias) bias_ = register_parameter("bias", empty({out_}), rule);
  reset_parameters(opt.seed);
}

Tensor Linear::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in_, "Linear(", in_, " -> ", out_, "): input ",
                   shape_str(x.shape()), " must end in ", in_, " features");
  return ops::linear(x, weight_, bias_);
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Conv2dOptions opt)
    : in_(in_channels), out_(out_channels), kernel_(kernel), opt_(opt) {
  COHORT_CHECK_ARG(in_ > 0 && out_ > 0 && kernel_ > 0, "Conv2d: channels and kernel must be ",
                   "positive, got in ", in_, " out ", out_, " kernel ", kernel_);
  COHORT_CHECK_ARG(opt.stride > 0 && opt.padding >= 0, "Conv2d: invalid stride ", opt.stride,
                   " or padding ", opt.padding);
  Init rule = Init::fan_in_uniform(in_ * kernel_ * kernel_);
  weight_ = register_parameter("weight", empty({out_, in_, kernel_, kernel_}), rule);
  if (opt.bias) bias_ = register_parameter("bias", empty({out_}), rule);
  reset_parameters(opt.seed);
}

Tensor Conv2d::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() == 4 && x.size(1) == in_, "Conv2d(", in_, " -> ", out_, ", ", kernel_,
                   "x", kernel_, "): input ", shape_str(x.shape()), " must be [N, ", in_,
                   ", H, W]");
  return ops::conv2d(x, weight_, bias_, {.stride = opt_.stride, .padding = opt_.padding});
}

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride) : kernel_(kernel), stride_(stride) {
  COHORT_CHECK_ARG(kernel > 0 && stride >= 0, "MaxPool2d: invalid kernel ", kernel, " or stride ",
                   stride);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return ops::max_pool2d(x, kernel_, stride_);
}

LayerNorm::LayerNorm(int64_t dim, LayerNormOptions opt) : dim_(dim), eps_(opt.eps) {
  COHORT_CHECK_ARG(dim > 0 && opt.eps > 0, "LayerNorm: invalid dim ", dim, " or eps ", opt.eps);
  weight_ = register_parameter("weight", ones({dim}), Init::ones());
  bias_ = register_parameter("bias", zeros({dim}), Init::zeros());
}

Tensor LayerNorm::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() >= 1 && x.size(-1) == dim_, "LayerNorm(", dim_, "): input ",
                   shape_str(x.shape()), " must end in ", dim_);
  return ops::layer_norm(x, weight_, bias_, eps_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, EmbeddingOptions opt)
    : num_(num_embeddings), dim_(dim) {
  COHORT_CHECK_ARG(num_ > 0 && dim_ > 0, "Embedding: invalid size ", num_, " x ", dim_);
  weight_ = register_parameter("weight", empty({num_, dim_}), Init::normal(0.0, 1.0));
  reset_parameters(opt.seed);
}

Tensor Embedding::forward(const Tensor& indices) {
  COHORT_CHECK_ARG(indices.dtype() == DType::i64, "Embedding(", num_, ", ", dim_,
                   "): indices must be int64, got ", dtype_name(indices.dtype()));
  return ops::embedding(weight_, indices);
}

Dropout::Dropout(double p, uint64_t seed) : p_(p), seed_(seed) {
  COHORT_CHECK_ARG(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
  counter_ = register_buffer(kDropoutCounterBuffer, zeros({}, DType::i64));
}

// The counter moves with the module (a buffer, so checkpoints keep it); on a GPU it is read and
// written through a copy, once per training forward.
uint64_t Dropout::counter() const {
  if (counter_.device().is_cpu()) return uint64_t(counter_.data<int64_t>()[0]);
  return uint64_t(counter_.item<int64_t>());
}

void Dropout::set_counter(uint64_t c) {
  if (counter_.device().is_cpu()) {
    counter_.data<int64_t>()[0] = int64_t(c);
    return;
  }
  Tensor host = zeros({}, DType::i64);
  host.data<int64_t>()[0] = int64_t(c);
  counter_.copy_(host);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  uint64_t k = counter();
  set_counter(k + 1);
  return ops::dropout(x, p_, derive_seed(seed_, k));
}

Tensor ReLU::forward(const Tensor& x) {
  return ops::relu(x);
}
Tensor GELU::forward(const Tensor& x) {
  return ops::gelu(x);
}
Tensor Flatten::forward(const Tensor& x) {
  return x.flatten(start_, end_);
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, child] : named_children()) y = (*child)(y);
  return y;
}

Module& Sequential::operator[](size_t i) const {
  COHORT_CHECK_ARG(i < size(), "Sequential: index ", i, " out of range for ", size(), " modules");
  return *named_children()[i].second;
}

void reseed_dropouts(Module& root, uint64_t seed) {
  for (auto& [name, m] : root.named_modules()) {
    if (auto* d = dynamic_cast<Dropout*>(m)) {
      d->set_seed(derive_seed(seed, ("dropout:" + name).c_str()));
      d->set_counter(0);
    }
  }
}

std::map<std::string, uint64_t> dropout_counters(const Module& root) {
  std::map<std::string, uint64_t> out;
  for (auto& [name, m] : root.named_modules())
    if (auto* d = dynamic_cast<const Dropout*>(m)) out[name] = d->counter();
  return out;
}

void set_dropout_counters(Module& root, const std::map<std::string, uint64_t>& counters) {
  std::map<std::string, Dropout*> sites;
  for (auto& [name, m] : root.named_modules())
    if (auto* d = dynamic_cast<Dropout*>(m)) sites[name] = d;
  for (auto& [name, c] : counters)
    COHORT_CHECK_ARG(sites.count(name), root.type_name(), ": set_dropout_counters: '", name,
                     "' is not a Dropout of this model");
  for (auto& [name, c] : counters) sites[name]->set_counter(c);
}

}  // namespace cohort::nn
