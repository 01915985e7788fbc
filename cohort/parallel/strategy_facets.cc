#include "cohort/parallel/strategy_facets.h"

#include "cohort/parallel/strategy.h"

namespace cohort::parallel {

ReplicatedCheckpoint::ReplicatedCheckpoint(const StrategyContext& ctx)
    : replica_model_(ctx.model), replica_optimizer_(ctx.optimizer), replica_group_(ctx.group) {}

// Every rank holds the same tensors, so only rank 0 gives them (the trainer writes rank 0's
// whole pieces); a worker without a group (parameter servers) gives them wherever it is, and
// the trainer takes them from its rank 0.
CheckpointPieces ReplicatedCheckpoint::pieces() const {
  if (replica_group_ && replica_group_->rank() != 0) return {};
  CheckpointPieces out;
  out.pieces = whole_pieces("model", replica_model_.state_dict());
  optim::OptimizerState os = replica_optimizer_.export_state();
  for (ckpt::TensorPiece& p : whole_pieces("optimizer", os.tensors)) out.pieces.push_back(p);
  out.optimizer_scalars = std::move(os.scalars);
  return out;
}

void ReplicatedCheckpoint::load(const CheckpointSource& from) {
  replica_model_.load_state_dict(from.whole_model());
  optim::OptimizerState os;
  os.tensors = from.whole_optimizer();
  os.scalars = from.optimizer_scalars;
  replica_optimizer_.import_state(os);
}

std::vector<ckpt::TensorPiece> whole_pieces(const std::string& section,
                                            const std::map<std::string, Tensor>& tensors) {
  std::vector<ckpt::TensorPiece> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    out.push_back({.section = section,
                   .name = name,
                   .global_shape = t.shape(),
                   .begin = 0,
                   .data = t,
                   .shard = -1});
  }
  return out;
}

}  // namespace cohort::parallel
