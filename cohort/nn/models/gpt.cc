#include "cohort/nn/models/gpt.h"

#include <algorithm>
#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/rng.h"
#include "cohort/nn/loss.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {
namespace {

constexpr double kInitStd = 0.02;

std::shared_ptr<GptLayers> layers_of(const GptOptions& o) {
  return o.layers ? o.layers : std::make_shared<GptLayers>();
}

// GPT-2's init: weights N(0, std), biases 0.
template <typename M>
std::shared_ptr<M> with_init(std::shared_ptr<M> m, double std) {
  m->set_init("weight", Init::normal(0.0, std));
  for (const auto& [name, t] : m->named_parameters())
    if (name == "bias") m->set_init("bias", Init::zeros());
  return m;
}
double resid_std(const GptOptions& o) {
  return kInitStd / std::sqrt(2.0 * double(o.n_layer));
}

void check_options(const GptOptions& o) {
  COHORT_CHECK_ARG(
      o.vocab_size > 0 && o.n_layer > 0 && o.n_head > 0 && o.n_embd > 0 && o.block_size > 0,
      "GPT: sizes must be positive (vocab_size ", o.vocab_size, ", n_layer ", o.n_layer,
      ", n_head ", o.n_head, ", n_embd ", o.n_embd, ", block_size ", o.block_size, ")");
  COHORT_CHECK_ARG(o.n_embd % o.n_head == 0, "GPT: n_embd ", o.n_embd,
                   " must be divisible by n_head ", o.n_head);
  COHORT_CHECK_ARG(o.dropout >= 0.0 && o.dropout < 1.0, "GPT: dropout must be in [0, 1), got ",
                   o.dropout);
  const int64_t end = o.range.end < 0 ? o.n_layer : o.range.end;
  COHORT_CHECK_ARG(o.range.begin >= 0 && o.range.begin < end && end <= o.n_layer,
                   "GPT: layer range [", o.range.begin, ", ", end,
                   ") must be a non-empty part of the ", o.n_layer, " layers");
  const int64_t shards = o.layers ? o.layers->shards() : 1;
  COHORT_CHECK_ARG(o.n_head % shards == 0 && o.n_embd % shards == 0 && o.vocab_size % shards == 0,
                   "GPT: ", shards, " tensor-parallel shards must divide n_head (", o.n_head,
                   "), n_embd (", o.n_embd, ") and vocab_size (", o.vocab_size, ")");
}

// Restores a module's training mode when a scope ends (generate runs in eval mode).
class TrainingModeGuard {
 public:
  TrainingModeGuard(Module& m, bool on) : m_(m), prev_(m.is_training()) { m_.train(on); }
  ~TrainingModeGuard() { m_.train(prev_); }
  TrainingModeGuard(const TrainingModeGuard&) = delete;
  TrainingModeGuard& operator=(const TrainingModeGuard&) = delete;

 private:
  Module& m_;
  bool prev_;
};

}  // namespace

std::shared_ptr<Module> GptLayers::column(int64_t in, int64_t out, int64_t parts, bool bias) {
  return std::make_shared<Linear>(in, out, LinearOptions{bias});
}
std::shared_ptr<Module> GptLayers::row(int64_t in, int64_t out, bool bias) {
  return std::make_shared<Linear>(in, out, LinearOptions{bias});
}
std::shared_ptr<Module> GptLayers::embedding(int64_t num, int64_t dim) {
  return std::make_shared<Embedding>(num, dim);
}
Tensor GptLayers::cross_entropy(const Tensor& logits, const Tensor& targets) {
  return nn::cross_entropy(logits, targets);
}

CausalSelfAttention::CausalSelfAttention(const GptOptions& opt) {
  auto layers = layers_of(opt);
  n_head_ = opt.n_head / layers->shards();
  n_embd_ = opt.n_embd / layers->shards();
  const int64_t C = opt.n_embd;
  qkv_ = register_module("qkv", with_init(layers->column(C, 3 * C, 3, true), kInitStd));
  proj_ = register_module("proj", with_init(layers->row(C, C, true), resid_std(opt)));
  drop_ = register_module("drop", std::make_shared<Dropout>(opt.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() == 3, "CausalSelfAttention: input ", shape_str(x.shape()),
                   " must be [B, T, C]");
  const int64_t B = x.size(0), T = x.size(1), C = n_embd_, H = n_head_, Dh = C / H;
  // [B, T, 3C] -> [B, T, 3, H, Dh] -> [3, B, H, T, Dh]: one copy, then q/k/v are contiguous
  // slices of it (split has a single backward that writes all three gradients).
  Tensor qkv = (*qkv_)(x).reshape({B, T, 3, H, Dh}).permute({2, 0, 3, 1, 4}).contiguous();
  std::vector<Tensor> parts = ops::split(qkv, {1, 1, 1}, 0);
  Tensor q = parts[0].reshape({B, H, T, Dh});
  Tensor k = parts[1].reshape({B, H, T, Dh});
  Tensor v = parts[2].reshape({B, H, T, Dh});
  Tensor y = ops::causal_attention(q, k, v);  // [B, H, T, Dh]
  y = y.transpose(1, 2).reshape({B, T, C});   // heads side by side again
  return (*drop_)((*proj_)(y));
}

GptMlp::GptMlp(const GptOptions& opt) {
  auto layers = layers_of(opt);
  const int64_t C = opt.n_embd;
  fc_ = register_module("fc", with_init(layers->column(C, 4 * C, 1, true), kInitStd));
  proj_ = register_module("proj", with_init(layers->row(4 * C, C, true), resid_std(opt)));
  drop_ = register_module("drop", std::make_shared<Dropout>(opt.dropout));
}

Tensor GptMlp::forward(const Tensor& x) {
  return (*drop_)((*proj_)(ops::gelu((*fc_)(x))));
}

GptBlock::GptBlock(const GptOptions& opt) {
  ln1_ = register_module("ln1", std::make_shared<LayerNorm>(opt.n_embd));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(opt));
  ln2_ = register_module("ln2", std::make_shared<LayerNorm>(opt.n_embd));
  mlp_ = register_module("mlp", std::make_shared<GptMlp>(opt));
}

Tensor GptBlock::forward(const Tensor& x) {
  Tensor h = x + (*attn_)((*ln1_)(x));
  return h + (*mlp_)((*ln2_)(h));
}

GPT::GPT(GptOptions opt) : opt_(opt) {
  check_options(opt_);
  layers_ = layers_of(opt_);
  opt_.layers = layers_;
  begin_ = opt_.range.begin;
  end_ = opt_.range.end < 0 ? opt_.n_layer : opt_.range.end;
  if (has_embedding()) {
    wte_ = register_module("wte",
                           with_init(layers_->embedding(opt_.vocab_size, opt_.n_embd), kInitStd));
    wpe_ = register_module(
        "wpe", with_init(std::make_shared<Embedding>(opt_.block_size, opt_.n_embd), kInitStd));
    drop_ = register_module("drop", std::make_shared<Dropout>(opt_.dropout));
  }
  blocks_ = register_module("blocks", std::make_shared<Sequential>());
  for (int64_t i = begin_; i < end_; ++i)
    blocks_->push_back(std::to_string(i), std::make_shared<GptBlock>(opt_));
  if (has_head()) {
    ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(opt_.n_embd));
    lm_head_ = register_module(
        "lm_head", with_init(layers_->column(opt_.n_embd, opt_.vocab_size, 1, false), kInitStd));
  }
  reset_parameters(opt_.seed);
  reseed_dropouts(*this, opt_.seed);
}

// idx int64 [B, T] -> [B, T, C]: token plus position embeddings, dropout.
Tensor GPT::embed(const Tensor& idx) {
  COHORT_CHECK_ARG(idx.dtype() == DType::i64 && idx.dim() == 2, "GPT: idx must be int64 [B, T], ",
                   "got ", dtype_name(idx.dtype()), " ", shape_str(idx.shape()));
  const int64_t T = idx.size(1);
  COHORT_CHECK_ARG(T >= 1 && T <= opt_.block_size, "GPT: sequence length T = ", T,
                   " must be in [1, block_size = ", opt_.block_size, "] (idx ",
                   shape_str(idx.shape()), ")");
  Tensor pos = arange(T, DType::i64).to(idx.device());
  return (*drop_)((*wte_)(idx) + (*wpe_)(pos));  // [B, T, C] + [T, C]
}

Tensor GPT::forward(const Tensor& in) {
  Tensor x = in;
  if (has_embedding()) {
    x = embed(in);
  } else {
    COHORT_CHECK_ARG(in.dtype() == DType::f32 && in.dim() == 3 && in.size(2) == opt_.n_embd,
                     "GPT stage from layer ", begin_, ": input must be float32 [B, T, ",
                     opt_.n_embd, "] (the previous stage's activations), got ",
                     dtype_name(in.dtype()), " ", shape_str(in.shape()));
  }
  x = (*blocks_)(x);
  if (!has_head()) return x;
  return (*lm_head_)((*ln_f_)(x));  // [B, T, V]
}

// logits [1, T, V]: samples from the last position's distribution.
int64_t GPT::sample_next(const Tensor& logits, const GenerateOptions& opt, uint64_t counter) const {
  const int64_t V = logits.size(2), T = logits.size(1);
  std::vector<float> all = logits.slice(1, T - 1, T).to_vector<float>();
  std::vector<double> z(all.begin(), all.end());
  if (opt.temperature == 0.0) return int64_t(std::max_element(z.begin(), z.end()) - z.begin());
  double cut = -INFINITY;
  if (opt.top_k > 0 && opt.top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(),
                     std::greater<double>());
    cut = sorted[size_t(opt.top_k - 1)];
  }
  double zmax = *std::max_element(z.begin(), z.end());
  double total = 0;
  for (double& v : z) {
    v = v < cut ? 0.0 : std::exp((v - zmax) / opt.temperature);
    total += v;
  }
  double u = double(Philox(opt.seed).uniform(counter)) * total;
  for (int64_t i = 0; i < V; ++i) {
    u -= z[size_t(i)];
    if (u < 0) return i;
  }
  for (int64_t i = V; i-- > 0;)  // rounding left u >= 0: the last token with mass
    if (z[size_t(i)] > 0) return i;
  return 0;
}

std::vector<int64_t> GPT::generate_tokens(std::vector<int64_t> tokens, const GenerateOptions& opt) {
  COHORT_CHECK_ARG(!tokens.empty(), "GPT::generate: the prompt is empty (need at least one token)");
  COHORT_CHECK_ARG(opt.temperature >= 0.0 && opt.top_k >= 0 && opt.max_new_tokens >= 0,
                   "GPT::generate: invalid temperature ", opt.temperature, ", top_k ", opt.top_k,
                   " or max_new_tokens ", opt.max_new_tokens);
  for (int64_t t : tokens)
    COHORT_CHECK_ARG(t >= 0 && t < opt_.vocab_size, "GPT::generate: token ", t,
                     " outside the vocabulary [0, ", opt_.vocab_size, ")");
  COHORT_CHECK_ARG(has_embedding() && has_head() && layers_->shards() == 1,
                   "GPT::generate needs the whole model in one process (this one holds layers [",
                   begin_, ", ", end_, ") of ", opt_.n_layer, " in ", layers_->shards(),
                   " tensor-parallel shard(s))");
  autograd::NoGradGuard no_grad;
  TrainingModeGuard eval_mode(*this, false);
  for (int64_t n = 0; n < opt.max_new_tokens; ++n) {
    size_t T = std::min(tokens.size(), size_t(opt_.block_size));
    std::vector<int64_t> ctx(tokens.end() - int64_t(T), tokens.end());
    Tensor logits =
        forward(from_vector_i64(ctx, {1, int64_t(T)}).to(wte_->param("weight").device()));
    tokens.push_back(sample_next(logits, opt, uint64_t(n)));
  }
  return tokens;
}

std::string GPT::generate(const std::string& prompt, const GenerateOptions& opt) {
  COHORT_CHECK_ARG(opt_.vocab_size <= 256, "GPT::generate(string) needs a byte-level ",
                   "vocabulary (vocab_size <= 256), this model has ", opt_.vocab_size);
  std::vector<int64_t> tokens;
  for (unsigned char c : prompt) tokens.push_back(int64_t(c));
  std::vector<int64_t> out = generate_tokens(std::move(tokens), opt);
  std::string text;
  for (int64_t t : out) text.push_back(char(uint8_t(t)));
  return text;
}

}  // namespace cohort::nn
