#pragma once
// Internal to train/: the parts of a checkpoint that may be cut into pieces (ckpt/sharded.h),
// read back whatever world size and strategy wrote them.
#include <map>
#include <string>
#include <vector>

#include "cohort/ckpt/sharded.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"

namespace cohort::train {

// A rank's pieces as named tensors, for sending them in the checkpoint encoding (the name
// carries section, tensor, first element and global shape), and back.
NamedTensors encode_pieces(const std::vector<ckpt::TensorPiece>& pieces);
std::vector<ckpt::TensorPiece> decode_pieces(const NamedTensors& tensors, int rank);

// Names in the checkpoint's optimizer section that belong to the strategy, not the optimizer.
inline constexpr char kStrategyPrefix[] = "strategy/";

// The model's parameters and buffers, whole, from a checkpoint of any layout.
nn::StateDict model_state_of(const ckpt::ShardedView& view);
// The optimizer's tensors ("<param>.<slot>"), whole (none when `with_optimizer` is false: a
// sharding strategy reads its own ranges); the strategy's ("strategy/...") apart.
std::map<std::string, Tensor> optimizer_tensors_of(const ckpt::ShardedView& view,
                                                   bool with_optimizer,
                                                   NamedTensors* strategy_tensors);

}  // namespace cohort::train
