#pragma once
// GPT: a decoder-only transformer over bytes (nanoGPT's layout, pre-LN).
//
//   idx int64 [B, T], T <= block_size
//   x = wte(idx) + wpe(0..T-1)                      [B, T, C]; drop
//   per block:  x = x + attn(ln1(x))                attn: qkv Linear C->3C, causal SDPA over
//               x = x + mlp(ln2(x))                 n_head heads, proj C->C, dropout
//                                                   mlp: fc C->4C, GELU, proj 4C->C, dropout
//   logits = lm_head(ln_f(x))                       [B, T, V]
//
// Parameter names: wte.weight, wpe.weight, blocks.{i}.ln1.{weight,bias},
// blocks.{i}.attn.qkv.{weight,bias}, blocks.{i}.attn.proj.{weight,bias}, blocks.{i}.ln2...,
// blocks.{i}.mlp.fc..., blocks.{i}.mlp.proj..., ln_f.{weight,bias}, lm_head.weight.
//
// Parts: GptOptions::range builds one pipeline stage's layers, GptOptions::layers builds them
// sharded for tensor parallelism (both keep the whole model's names and initial values).
// Choices (documented differences from nanoGPT):
// - lm_head is NOT tied to wte: a parameter shared by two names would be counted, reduced and
//   checkpointed twice by every consumer of named_parameters(). lm_head has no bias.
// - Dropout is applied after the embeddings and after each residual branch's projection, not
//   to the attention probabilities (the fused causal attention op has no dropout inside).
// Init (GPT-2 / nanoGPT): Linear and Embedding weights N(0, 0.02), the residual projections
// (attn.proj, mlp.proj) N(0, 0.02 / sqrt(2 * n_layer)), biases 0, LayerNorm 1/0.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cohort/nn/layers.h"

namespace cohort::nn {

// The layers a GPT is built from: ordinary ones by default. Tensor parallelism
// (parallel/tensor/tensor_parallel.h) supplies sharded ones over a group, so the same GPT code runs
// whole or split across ranks (Megatron-LM's column- and row-parallel layers). Every module
// made here names its parameters "weight" and "bias", as Linear and Embedding do.
class GptLayers {
 public:
  virtual ~GptLayers() = default;
  // How many ranks share each layer (1: none). Attention keeps n_head / shards() heads.
  virtual int64_t shards() const { return 1; }
  // [..., in] -> [..., out / shards()]: the output features split; the output's `parts` equal
  // blocks (a fused qkv: 3) are each split alike.
  virtual std::shared_ptr<Module> column(int64_t in, int64_t out, int64_t parts, bool bias);
  // [..., in / shards()] -> [..., out]: the input features split, the partial products summed
  // over the shards.
  virtual std::shared_ptr<Module> row(int64_t in, int64_t out, bool bias);
  // int64 ids -> [..., dim]: the rows (the vocabulary) split over the shards.
  virtual std::shared_ptr<Module> embedding(int64_t num, int64_t dim);
  // Mean cross-entropy of logits as the head makes them ([B, T, V / shards()]) against int64
  // targets [B, T].
  virtual Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
  // The whole vocabulary's logits [B, T, V] (evaluation, sampling).
  virtual Tensor full_logits(const Tensor& logits) { return logits; }
};

// Which layers a GPT object holds (a pipeline stage, parallel/pipeline/pipeline_engine.h): blocks
// [begin, end) (end -1: n_layer), the embeddings when begin is 0, the final norm and the head
// when end is n_layer. Names stay those of the whole model ("blocks.2.attn.qkv.weight"), so a
// stage's parameters, initial values and checkpoint entries are the whole model's.
struct GptRange {
  int64_t begin = 0;
  int64_t end = -1;
};

struct GptOptions {
  int64_t vocab_size = 256;  // byte-level
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 128;  // longest context
  double dropout = 0.0;
  uint64_t seed = 0;
  GptRange range;                     // the whole model by default
  std::shared_ptr<GptLayers> layers;  // null: ordinary layers
};

// x [B, T, C] -> [B, T, C]: causal multi-head self-attention with a fused qkv projection.
class CausalSelfAttention : public Module {
 public:
  explicit CausalSelfAttention(const GptOptions& opt);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CausalSelfAttention"; }

 private:
  int64_t n_head_, n_embd_;  // this rank's heads and their width (all of them unsharded)
  std::shared_ptr<Module> qkv_, proj_;
  std::shared_ptr<Dropout> drop_;
};

// x [B, T, C] -> [B, T, C]: fc C->4C, GELU, proj 4C->C, dropout.
class GptMlp : public Module {
 public:
  explicit GptMlp(const GptOptions& opt);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GptMlp"; }

 private:
  std::shared_ptr<Module> fc_, proj_;
  std::shared_ptr<Dropout> drop_;
};

class GptBlock : public Module {
 public:
  explicit GptBlock(const GptOptions& opt);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GptBlock"; }

 private:
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<GptMlp> mlp_;
};

struct GenerateOptions {
  int64_t max_new_tokens = 100;
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: sample from the whole vocabulary
  uint64_t seed = 0;         // token n is drawn with Philox(seed) at counter n
};

class GPT : public Module {
 public:
  explicit GPT(GptOptions opt = {});
  // idx int64 [B, T] with 1 <= T <= block_size and values in [0, vocab_size) -> [B, T, V]
  // (V / shards under tensor parallelism). A stage without the embeddings takes the previous
  // stage's activations [B, T, C] instead; one without the head returns its activations.
  Tensor forward(const Tensor& idx) override;
  std::string type_name() const override { return "GPT"; }
  const GptOptions& options() const { return opt_; }
  bool has_embedding() const { return begin_ == 0; }
  bool has_head() const { return end_ == opt_.n_layer; }
  // The layers it was built from (ordinary ones unless options().layers was set).
  GptLayers& layers() const { return *layers_; }

  // Autoregressive sampling in eval mode without recording gradients (the training mode is
  // restored afterwards). The context is cropped to the last block_size tokens. Returns the
  // prompt followed by the new tokens.
  std::vector<int64_t> generate_tokens(std::vector<int64_t> prompt, const GenerateOptions& opt);
  // Byte-level convenience: the prompt's bytes are the tokens (needs vocab_size <= 256).
  std::string generate(const std::string& prompt, const GenerateOptions& opt);

 private:
  int64_t sample_next(const Tensor& logits, const GenerateOptions& opt, uint64_t counter) const;

  Tensor embed(const Tensor& idx);

  GptOptions opt_;
  int64_t begin_, end_;
  std::shared_ptr<GptLayers> layers_;
  std::shared_ptr<Module> wte_;
  std::shared_ptr<Embedding> wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<Sequential> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Module> lm_head_;
};

}  // namespace cohort::nn
