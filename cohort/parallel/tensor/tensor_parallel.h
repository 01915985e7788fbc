#pragma once
// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): each layer's weight is split over the
// ranks of a tensor-parallel group, and the activations meet in one allreduce per split pair.
//
//   ColumnParallelLinear  weight [out/c, in], bias [out/c]: y_k = x W_k^T + b_k; the output's
//                         features are split. Forward copies x in (copy_to_group: backward
//                         allreduces dL/dx).
//   RowParallelLinear     weight [out, in/c], bias [out] replicated: y = sum_k x_k W_k^T + b;
//                         takes the column layer's split output, sums the partial products
//                         (reduce_from_group: forward allreduce) and adds the bias once.
//   VocabParallelEmbedding weight [num/c, dim]: rank k owns rows [k num/c, (k+1) num/c); ids
//                         elsewhere give zero rows; the rows are summed (reduce_from_group).
//   vocab_parallel_cross_entropy: the loss of logits split along the vocabulary without
//                         gathering them (three small allreduces of [N] values).
//
// A transformer block is column -> row twice (attention qkv/proj, mlp fc/proj): one allreduce
// in forward (after each row layer) and one in backward (before each column layer) per pair.
//
// Every sharded parameter is registered with its nn::ShardSpec, so reset_parameters(seed) fills
// it with exactly its slice of the unsharded tensor's draw: the sharded model starts where the
// unsharded one does, and gather_full_state joins the pieces into the unsharded state dict.
//
//   nn::GptOptions o;
//   o.layers = std::make_shared<parallel::TensorParallelLayers>(tp_group);
//   nn::GPT gpt(o);                                      // this rank's shard
//   Tensor loss = gpt.layers().cross_entropy(gpt(idx), y);
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/nn/models/gpt.h"
#include "cohort/nn/module.h"
#include "cohort/parallel/tensor/tp_ops.h"

namespace cohort::parallel {

// x [..., in] -> [..., out / c]. `parts` equal blocks of the output (a fused qkv: 3) are each
// split alike, so the rank holds q_k ; k_k ; v_k. Init as nn::Linear: U(+-1/sqrt(in)).
class ColumnParallelLinear : public nn::Module {
 public:
  ColumnParallelLinear(int64_t in, int64_t out, int64_t parts, bool bias, GroupPtr group);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ColumnParallelLinear"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t in_, out_;
  GroupPtr group_;
  Tensor weight_, bias_;
};

// x [..., in / c] (this rank's features) -> [..., out], the same on every rank.
class RowParallelLinear : public nn::Module {
 public:
  RowParallelLinear(int64_t in, int64_t out, bool bias, GroupPtr group);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RowParallelLinear"; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  int64_t in_, out_;
  GroupPtr group_;
  Tensor weight_, bias_;
};

// int64 ids [...] in [0, num) -> [..., dim], the same on every rank. Init as nn::Embedding.
class VocabParallelEmbedding : public nn::Module {
 public:
  VocabParallelEmbedding(int64_t num, int64_t dim, GroupPtr group);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "VocabParallelEmbedding"; }
  const Tensor& weight() const { return weight_; }

 private:
  int64_t num_, dim_;
  GroupPtr group_;
  Tensor weight_;
};

// Mean cross-entropy of logits split along the vocabulary: logits [..., V / c] (this rank's
// classes [k V/c, (k+1) V/c)), targets int64 [...] in [0, V). Equal to nn::cross_entropy of
// the gathered logits within float rounding; the same value on every rank. Backward: this
// rank's (softmax - onehot) / N.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    const GroupPtr& group);

// The GPT's layers sharded over `group` (nn::GptLayers): shards() = group size.
class TensorParallelLayers : public nn::GptLayers {
 public:
  explicit TensorParallelLayers(GroupPtr group);
  int64_t shards() const override { return group_->size(); }
  std::shared_ptr<nn::Module> column(int64_t in, int64_t out, int64_t parts, bool bias) override;
  std::shared_ptr<nn::Module> row(int64_t in, int64_t out, bool bias) override;
  std::shared_ptr<nn::Module> embedding(int64_t num, int64_t dim) override;
  Tensor cross_entropy(const Tensor& logits, const Tensor& targets) override;
  Tensor full_logits(const Tensor& logits) override;
  const GroupPtr& group() const { return group_; }

 private:
  GroupPtr group_;
};

// Checkpoints and equivalence checks.
// Collective over tp: every sharded parameter of m (m.shard_specs()) allgathered and joined
// into the unsharded tensor; other parameters and buffers as they are (sharing storage, as
// state_dict does). Names are the unsharded model's. InvalidArgument when a spec's shard count
// is not tp's size.
nn::StateDict gather_full_state(const nn::Module& m, comm::ProcessGroup& tp);
// The same for any named tensors of m's names (gradients: pass each parameter's grad).
nn::StateDict gather_full(const nn::NamedTensors& named, const nn::Module& m,
                          comm::ProcessGroup& tp);
// The inverse (no communication): each sharded parameter of m gets its piece of full's tensor,
// the others are copied. All-or-nothing; a missing name or a full tensor of the wrong shape is
// an InvalidArgument naming the parameter.
void load_full_state(nn::Module& m, const nn::StateDict& full);
// Bytes this rank holds of m's sharded parameters (1/c of their unsharded size).
int64_t sharded_parameter_bytes(const nn::Module& m);

}  // namespace cohort::parallel
