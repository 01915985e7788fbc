#pragma once
// Strategy: how a training step is distributed. The one seam every way of training plugs into
// (DDP, local SGD, and later ZeRO, pipeline, parameter servers): the trainer (train/) calls only
// this interface, and a strategy talks to the network only through comm::ProcessGroup. A new
// strategy is a class plus one register_strategy() call (strategy_registry.h); nothing in the
// trainer changes. Usable without the trainer: a hand-written loop runs
//
//   auto s = parallel::make_strategy("ddp", {model, opt, group, cfg});
//   for (micro-batch m of k) {
//     Tensor loss = nn::cross_entropy(s->forward(x_m), y_m);
//     s->backward(ops::mul_scalar(loss, 1.0 / k), /*sync=*/m == k - 1);
//   }
//   s->clip_grad_norm(1.0);  // optional
//   s->step();
//   s->zero_grad();
//
// Contract: every rank calls the same methods in the same order, and a strategy may communicate
// in any of them except state() and load_state(): state() is called on rank 0 alone (it writes
// the checkpoint, after prepare_checkpoint() on every rank), load_state() on every rank with
// rank 0's state. The default implementations are those of single-process training.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/ckpt/sharded.h"
#include "cohort/comm/process_group.h"
#include "cohort/core/config.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"
#include "cohort/parallel/mesh.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/store.h"

namespace cohort::metrics {
class Tracer;
}

namespace cohort::parallel {

// What a strategy is built from. `group` is null for a job of one process.
struct StrategyContext {
  nn::Module& model;
  optim::Optimizer& optimizer;
  std::shared_ptr<comm::ProcessGroup> group;
  const Config& config;  // the strategy reads its own keys (declared with its registration)
  // For strategies that reach services outside the group (parameter servers): the job's
  // rendezvous store (null for a job started by hand), the launcher's environment (roles,
  // the job secret), and the run's length in optimizer steps (0: unknown).
  std::shared_ptr<rendezvous::Store> store = nullptr;
  const rendezvous::EnvMap* env = nullptr;
  int64_t total_steps = 0;
  // This process in the job, also when it forms no group (parameter-server workers), and how
  // often it was restarted alone (COHORT_WORKER_RESTARTS).
  int rank = 0;
  int world_size = 1;
  int restarts_alone = 0;
  // The device mesh when the model is split over ranks (parallel.pp or parallel.tp > 1; the
  // "model_parallel" strategy); null otherwise.
  std::shared_ptr<const DeviceMesh> mesh = nullptr;
};

// One micro-batch of a step: inputs, targets, and its share of the step's samples (the
// weights of a step sum to 1, so the step's gradient is the mean over all its samples).
struct MicroBatch {
  Tensor x, y;
  double weight = 1;
};

// A stretch of a step's work, for the run's timeline ("forward", "backward", "pipeline").
struct StepPhase {
  const char* name = "";
  std::chrono::steady_clock::time_point from, to;
};

// What forward_backward did: the step's loss (the weighted mean over its micro-batches, as
// this rank's model replica sees it) and where the time went.
struct ForwardBackwardResult {
  double loss = 0;
  double forward_s = 0, backward_s = 0;
  std::vector<StepPhase> phases;
};

// Communication of the last step, for the step metrics (train/step_metrics.h).
struct StrategyStats {
  double comm_s = 0;     // time collectives ran
  double exposed_s = 0;  // part of it the step waited for (not hidden behind computation)
  uint64_t bytes_sent = 0, bytes_received = 0;
};

// What a strategy keeps across a checkpoint. Saved from rank 0 and restored on every rank, so it
// must be the same on every rank. State that differs between ranks (error-feedback residuals)
// sets `per_rank`: saving it is then refused with an error naming the strategy, rather than
// resuming every rank from rank 0's (per-rank checkpoint files come with resharding
// checkpoints, issue 15).
struct StrategyState {
  nn::NamedTensors tensors;
  nlohmann::json values = nlohmann::json::object();
  bool per_rank = false;
};

class Strategy {
 public:
  explicit Strategy(const StrategyContext& ctx)
      : model_(ctx.model), optimizer_(ctx.optimizer), group_(ctx.group) {}
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // The registered name ("ddp", "none", ...).
  virtual std::string name() const = 0;
  // The model's forward (through a wrapper where the strategy has one).
  virtual Tensor forward(const Tensor& x) { return model_.forward(x); }
  // A step's forward and backward over its micro-batches, gradients left for clip_grad_norm()
  // and step(). The default runs each micro-batch's forward(), cross-entropy and backward(),
  // weighted, with sync on the last; a pipeline runs its schedule over the stages instead, and
  // tensor parallelism computes the loss over the sharded vocabulary.
  virtual ForwardBackwardResult forward_backward(const std::vector<MicroBatch>& micro);
  // The model's output for evaluation (no gradients recorded): [batch..., classes] on every
  // rank. A model split over ranks assembles it (the last stage's logits, the whole vocabulary).
  virtual Tensor eval_forward(const Tensor& x) { return model_(x); }
  // Backward of one micro-batch's loss. `sync` is false for all but the last micro-batch of a
  // step (gradient accumulation): a data-parallel strategy communicates only when it is true.
  virtual void backward(const Tensor& loss, bool sync);
  // Clips gradients by their global L2 norm (over every rank's shard where the strategy
  // shards them); returns the norm before clipping.
  virtual double clip_grad_norm(double max_norm);
  // The optimizer step, and whatever communication follows it (e.g. averaging parameters).
  virtual void step() { optimizer_.step(); }
  virtual void zero_grad() { optimizer_.zero_grad(); }
  virtual StrategyStats last_stats() const { return {}; }
  // Metrics of its own (the ps strategy's staleness, ...): over the steps since the last call,
  // merged into the trainer's metrics.jsonl step records; and over the run, merged into the
  // summary record. None by default.
  virtual nlohmann::json take_interval_metrics() { return nlohmann::json::object(); }
  virtual nlohmann::json summary_metrics() const { return nlohmann::json::object(); }
  // A line rank 0 prints with the run's summary (a pipeline's measured bubble beside the
  // formula's); empty: none.
  virtual std::string summary_line() const { return ""; }
  // Collective, on every rank, before rank 0 calls state() for a checkpoint: a strategy whose
  // ranks hold different replicas between synchronizations (local SGD) makes them agree here,
  // so that rank 0's model, optimizer state and state() describe every rank.
  virtual void prepare_checkpoint() {}
  virtual StrategyState state() const { return {}; }
  // Restores what state() returned (InvalidArgument naming what does not fit). An empty state
  // (a checkpoint written by another strategy) leaves the strategy as constructed.
  virtual void load_state(const StrategyState& state) {}
  // Puts a checkpoint's parameters and buffers (whole tensors) into the model. A strategy that
  // keeps parameters elsewhere between uses (ZeRO-3's shards) takes its part of them here.
  virtual void load_model(const nn::StateDict& state) { model_.load_state_dict(state); }
  // The same from the checkpoint's view (ckpt/sharded.h); `whole` reads every tensor whole.
  // The default loads whole(); a strategy whose ranks hold parts of the model reads only its
  // own tensors, so that no rank materialises the whole model.
  virtual void load_model_from(const ckpt::ShardedView& view,
                               const std::function<nn::StateDict()>& whole) {
    load_model(whole());
  }
  // A strategy that shards the optimizer's state (ZeRO) says so here: each rank then holds only
  // part of it, and the trainer saves every rank's optimizer_pieces() (the optimizer's
  // checkpoint names, "<param>.<slot>", cut as the rank holds them: ckpt/sharded.h) with rank
  // 0's optimizer_scalars() ("<param>.step", "lr"), and restores through load_optimizer(),
  // whatever world size and strategy wrote the checkpoint. The others keep the defaults: the
  // trainer saves and restores the optimizer itself.
  virtual bool shards_optimizer() const { return false; }
  // Likewise for the model (a model split over ranks): each rank's model_pieces(), section
  // "model", replace rank 0's state_dict in checkpoints. Collective, like optimizer_pieces().
  virtual bool shards_model() const { return false; }
  virtual std::vector<ckpt::TensorPiece> model_pieces() const { return {}; }
  virtual std::vector<ckpt::TensorPiece> optimizer_pieces() const { return {}; }
  virtual std::map<std::string, double> optimizer_scalars() const { return {}; }
  virtual void load_optimizer(const ckpt::ShardedView& view,
                              const std::map<std::string, double>& scalars) {}
  // Waits for communication still in flight; never throws. Called before destruction.
  virtual void shutdown() noexcept {}
  // After the last step, before the final evaluation and checkpoint: a strategy whose replica
  // may lag behind the job's model (parameter servers in ASP/SSP) brings it in here.
  virtual void finish_training() {}
  // The step this worker's training starts at when the strategy decides it rather than a
  // checkpoint: a parameter-server worker restarted alone rejoins where the servers are. 0: the
  // trainer's own position (fresh, or its checkpoint's).
  virtual int64_t start_step() const { return 0; }
  // Whether the strategy restores the job itself on resume (parameter servers: the servers
  // load their checkpoints, the workers start at start_step()): the trainer then never loads a
  // checkpoint of its own, and with start_step() 0 starts fresh.
  virtual bool resumes_itself() const { return false; }
  // The run's timeline (metrics/trace.h; null: off), for spans of the strategy's own
  // communication (DDP: each bucket's allreduce). Owned by the caller, which keeps it alive
  // until the strategy is gone. The trainer traces forward, backward and step around it.
  virtual void set_tracer(metrics::Tracer* tracer) { tracer_ = tracer; }

  nn::Module& model() { return model_; }
  optim::Optimizer& optimizer() { return optimizer_; }
  const std::shared_ptr<comm::ProcessGroup>& group() const { return group_; }

 protected:
  nn::Module& model_;
  optim::Optimizer& optimizer_;
  std::shared_ptr<comm::ProcessGroup> group_;
  metrics::Tracer* tracer_ = nullptr;
};

}  // namespace cohort::parallel
