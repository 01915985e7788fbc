#include "cohort/nn/models/gpt.h"

#include <algorithm>
#include <cmath>

#include "cohort/autograd/node.h"
#include "cohort/core/rng.h"
#include "cohort/ops/ops.h"

namespace cohort::nn {
namespace {

constexpr double kInitStd = 0.02;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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

CausalSelfAttention::CausalSelfAttention(const GptOptions& opt)
    : n_head_(opt.n_head), n_embd_(opt.n_embd) {
  qkv_ = register_module("qkv", std::make_shared<Linear>(n_embd_, 3 * n_embd_));
  proj_ = register_module("proj", std::make_shared<Linear>(n_embd_, n_embd_));
  drop_ = register_module("drop", std::make_shared<Dropout>(opt.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  COHORT_CHECK_ARG(x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention: input ",
                   shape_str(x.shape()), " must be [B, T, ", n_embd_, "]");
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
  fc_ = register_module("fc", std::make_shared<Linear>(opt.n_embd, 4 * opt.n_embd));
  proj_ = register_module("proj", std::make_shared<Linear>(4 * opt.n_embd, opt.n_embd));
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
  wte_ = register_module("wte", std::make_shared<Embedding>(opt_.vocab_size, opt_.n_embd));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(opt_.block_size, opt_.n_embd));
  drop_ = register_module("drop", std::make_shared<Dropout>(opt_.dropout));
  blocks_ = register_module("blocks", std::make_shared<Sequential>());
  for (int64_t i = 0; i < opt_.n_layer; ++i) blocks_->push_back(std::make_shared<GptBlock>(opt_));
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(opt_.n_embd));
  lm_head_ = register_module(
      "lm_head", std::make_shared<Linear>(opt_.n_embd, opt_.vocab_size, LinearOptions{false}));
  apply_gpt_init();
  reset_parameters(opt_.seed);
  reseed_dropouts(*this, opt_.seed);
}

void GPT::apply_gpt_init() {
  const double resid_std = kInitStd / std::sqrt(2.0 * double(opt_.n_layer));
  for (auto& [name, m] : named_modules()) {
    if (auto* lin = dynamic_cast<Linear*>(m)) {
      bool resid = ends_with(name, "attn.proj") || ends_with(name, "mlp.proj");
      lin->set_init("weight", Init::normal(0.0, resid ? resid_std : kInitStd));
      if (lin->bias().defined()) lin->set_init("bias", Init::zeros());
    } else if (auto* emb = dynamic_cast<Embedding*>(m)) {
      emb->set_init("weight", Init::normal(0.0, kInitStd));
    }
  }
}

Tensor GPT::forward(const Tensor& idx) {
  COHORT_CHECK_ARG(idx.dtype() == DType::i64 && idx.dim() == 2, "GPT: idx must be int64 [B, T], ",
                   "got ", dtype_name(idx.dtype()), " ", shape_str(idx.shape()));
  const int64_t T = idx.size(1);
  COHORT_CHECK_ARG(T >= 1 && T <= opt_.block_size, "GPT: sequence length T = ", T,
                   " must be in [1, block_size = ", opt_.block_size, "] (idx ",
                   shape_str(idx.shape()), ")");
  Tensor pos = arange(T, DType::i64);
  Tensor x = (*wte_)(idx) + (*wpe_)(pos);  // [B, T, C] + [T, C]
  x = (*blocks_)((*drop_)(x));
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
  autograd::NoGradGuard no_grad;
  TrainingModeGuard eval_mode(*this, false);
  for (int64_t n = 0; n < opt.max_new_tokens; ++n) {
    size_t T = std::min(tokens.size(), size_t(opt_.block_size));
    std::vector<int64_t> ctx(tokens.end() - int64_t(T), tokens.end());
    Tensor logits = forward(from_vector_i64(ctx, {1, int64_t(T)}));
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
