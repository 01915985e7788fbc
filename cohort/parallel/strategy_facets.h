#pragma once
// The facets of a Strategy (strategy.h): what a strategy offers beyond the core step only if it
// needs it, each with one contract. A strategy offers a facet by deriving from it; the trainer
// finds it through Strategy::checkpoint(), metrics() and lifecycle(). The world hooks, read
// before a strategy exists, are part of its registration (strategy_registry.h, StrategyWorld).
//
//   checkpoint  StrategyCheckpoint: the pieces of model and optimizer this rank contributes to
//               a checkpoint and how it takes them back, plus state of its own. Every strategy
//               has one: a strategy that offers none gets ReplicatedCheckpoint.
//   metrics     StrategyMetrics: its communication figures and metrics of its own.
//   lifecycle   StrategyLifecycle: how the run starts and ends around the steps.
//
// How the next changes fit without a new virtual method on the core:
//  - A membership change (a worker leaves or joins between steps) is a lifecycle event:
//    StrategyLifecycle gains an on_membership(new group, old rank -> new rank) hook called
//    between steps on every surviving and joining rank; the default rebuilds nothing and is
//    refused by strategies that cannot re-form (the trainer then restarts the job). A joining
//    rank is brought up through the checkpoint facet's pieces (load() reads any world size),
//    and StrategyWorld says whether a strategy admits changes at all.
//  - A device other than the CPU is a property of the tensors and of the process group, not of
//    the core methods (they take and return Tensors wherever they live). StrategyContext gains
//    the device; a strategy that needs device streams or events keeps them behind its own
//    members. Checkpoint pieces are always host tensors (a device strategy copies in pieces()
//    and back in load()), so the checkpoint format stays device-free.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/ckpt/sharded.h"
#include "cohort/comm/process_group.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"

namespace cohort::metrics {
class Tracer;
}

namespace cohort::parallel {

struct StrategyContext;

// What a strategy keeps across a checkpoint beyond the model and the optimizer. Saved from
// rank 0 and restored on every rank, so it must be the same on every rank. State that differs
// between ranks (error-feedback residuals) sets `per_rank`: every rank's tensors are then
// saved in a file of its own, and a resume needs the same world size.
struct StrategyState {
  nn::NamedTensors tensors;
  nlohmann::json values = nlohmann::json::object();
  bool per_rank = false;
};

// What one rank contributes to a checkpoint: every tensor of the model (section "model",
// Module::state_dict names) and of the optimizer (section "optimizer", "<param>.<slot>") is in
// the pieces of exactly one rank, or cut over several; so a checkpoint always holds its model.
// A tensor every rank holds alike is the one-piece case: `shard` = -1 and `data` the tensor
// itself in its global shape, taken from rank 0 and written whole (model.safetensors,
// optimizer.safetensors). Any other piece (`shard` >= 0, 1-D data, ckpt/sharded.h) is sent to
// rank 0 and written to the sending rank's shard file.
struct CheckpointPieces {
  std::vector<ckpt::TensorPiece> pieces;
  std::map<std::string, double> optimizer_scalars;  // rank 0's are saved ("<param>.step", "lr")
};

// Where a checkpoint's tensors are read back from, whatever world size and strategy wrote it.
struct CheckpointSource {
  const ckpt::ShardedView& view;
  // Every model tensor whole (with what older checkpoints kept elsewhere folded in).
  std::function<nn::StateDict()> whole_model;
  // Every optimizer tensor whole ("<param>.<slot>"; the strategy's own tensors left out).
  std::function<std::map<std::string, Tensor>()> whole_optimizer;
  std::map<std::string, double> optimizer_scalars;
};

// The checkpoint facet. Every rank calls prepare_checkpoint() then pieces() at the same steps
// (both may communicate); state() is called on every rank, and its values are taken from
// rank 0. On resume every rank calls load() and then, for a checkpoint the same strategy
// wrote, load_state().
class StrategyCheckpoint {
 public:
  virtual ~StrategyCheckpoint() = default;
  // Makes rank 0's view describe every rank where ranks hold different replicas between
  // synchronizations (local SGD averages here; ZeRO-3 gathers its parameters).
  virtual void prepare_checkpoint() {}
  virtual CheckpointPieces pieces() const = 0;
  // Restores this rank's part of the model and optimizer (InvalidArgument for what does not
  // fit). A rank that holds part of the model reads only its own tensors.
  virtual void load(const CheckpointSource& from) = 0;
  virtual StrategyState state() const { return {}; }
  // Restores what state() returned (InvalidArgument naming what does not fit).
  virtual void load_state(const StrategyState& state) {}
};

// Model and optimizer whole and alike on every rank (DDP, local SGD, single process): rank 0
// gives every tensor as one whole piece, and every rank loads them whole.
class ReplicatedCheckpoint : public StrategyCheckpoint {
 public:
  explicit ReplicatedCheckpoint(const StrategyContext& ctx);
  CheckpointPieces pieces() const override;
  void load(const CheckpointSource& from) override;

 private:
  nn::Module& replica_model_;
  optim::Optimizer& replica_optimizer_;
  std::shared_ptr<comm::ProcessGroup> replica_group_;
};

// The tensors of `section` as whole pieces (shard -1), in the map's order.
std::vector<ckpt::TensorPiece> whole_pieces(const std::string& section,
                                            const std::map<std::string, Tensor>& tensors);

// Communication of the last step, for the step metrics (train/step_metrics.h).
struct StrategyStats {
  double comm_s = 0;     // time collectives ran
  double exposed_s = 0;  // part of it the step waited for (not hidden behind computation)
  uint64_t bytes_sent = 0, bytes_received = 0;
};

// The metrics facet: what the strategy reports into the trainer's metrics (metrics.jsonl step
// records and the summary). A strategy without it reports nothing of its own.
class StrategyMetrics {
 public:
  virtual ~StrategyMetrics() = default;
  virtual StrategyStats last_stats() const { return {}; }
  // Over the steps since the last call, merged into the step records.
  virtual nlohmann::json take_interval_metrics() { return nlohmann::json::object(); }
  // Over the run, merged into the summary record.
  virtual nlohmann::json summary_metrics() const { return nlohmann::json::object(); }
  // A line rank 0 prints with the run's summary (a pipeline's measured bubble); empty: none.
  virtual std::string summary_line() const { return ""; }
  // The run's timeline (metrics/trace.h; null: off), for spans of the strategy's own
  // communication; owned by the caller, alive until the strategy is gone.
  virtual void trace_to(metrics::Tracer* tracer) {}
};

// The lifecycle facet: the run around the steps. Without it, training starts at the trainer's
// own position (fresh, or its checkpoint's) and ends with the last step.
class StrategyLifecycle {
 public:
  virtual ~StrategyLifecycle() = default;
  // After the last step, before the final evaluation and checkpoint: a strategy whose replica
  // may lag behind the job's model (parameter servers in ASP/SSP) brings it in here.
  virtual void finish_training() {}
  // Where training starts when the strategy restores the job itself (parameter servers: the
  // servers load their checkpoints): the step a worker rejoins at, or 0 for a fresh start
  // whatever rank 0 saved; the trainer then loads no checkpoint of its own. -1: the trainer's
  // own position.
  virtual int64_t resume_step() const { return -1; }
};

}  // namespace cohort::parallel
