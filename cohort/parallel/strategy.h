#pragma once
// Strategy: how a training step is distributed. The one seam every way of training plugs into
// (DDP, ZeRO, local SGD, gossip, pipeline and tensor parallelism, parameter servers): the
// trainer (train/) calls only this interface and its facets, and a strategy talks to the
// network only through comm::ProcessGroup. A new strategy is a class plus one
// register_strategy() call (strategy_registry.h); nothing in the trainer changes. Usable
// without the trainer: a hand-written loop runs
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
// The core below is the step. Everything else is a facet a strategy offers only if it needs it
// (strategy_facets.h): checkpoint (pieces of model and optimizer, and state of its own),
// metrics, lifecycle; and world hooks in its registration (how it shapes the world it runs in).
// Contract: every rank calls the same methods in the same order, and a strategy may
// communicate in any of them. The defaults are those of single-process training.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/comm/process_group.h"
#include "cohort/core/config.h"
#include "cohort/nn/module.h"
#include "cohort/optim/optimizer.h"
#include "cohort/parallel/mesh.h"
#include "cohort/parallel/strategy_facets.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/store.h"

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

// The loss of one micro-batch: the model's output and the targets to a scalar.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& targets)>;

class Strategy {
 public:
  explicit Strategy(const StrategyContext& ctx);
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // The registered name ("ddp", "none", ...).
  virtual std::string name() const = 0;
  // The model's forward (through a wrapper where the strategy has one).
  virtual Tensor forward(const Tensor& x) { return model_.forward(x); }
  // A step's forward and backward over its micro-batches with `loss`, gradients left for
  // clip_grad_norm() and step(). The default runs each micro-batch's forward(), loss and
  // backward(), weighted, with sync on the last; a pipeline runs its schedule over the stages
  // instead, and tensor parallelism computes cross-entropy over the sharded vocabulary.
  virtual ForwardBackwardResult forward_backward(const std::vector<MicroBatch>& micro,
                                                 const LossFn& loss);
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
  // Waits for communication still in flight; never throws. Called before destruction.
  virtual void shutdown() noexcept {}

  // Facets (strategy_facets.h), found by what the strategy derives from. Every strategy has a
  // checkpoint facet (ReplicatedCheckpoint unless it offers its own); metrics() and
  // lifecycle() are null for a strategy without them.
  StrategyCheckpoint& checkpoint();
  StrategyMetrics* metrics();
  StrategyLifecycle* lifecycle();
  // The run's timeline (metrics/trace.h; null: off), passed on to the metrics facet.
  void set_tracer(metrics::Tracer* tracer);

  nn::Module& model() { return model_; }
  optim::Optimizer& optimizer() { return optimizer_; }
  const std::shared_ptr<comm::ProcessGroup>& group() const { return group_; }

 protected:
  nn::Module& model_;
  optim::Optimizer& optimizer_;
  std::shared_ptr<comm::ProcessGroup> group_;
  metrics::Tracer* tracer_ = nullptr;

 private:
  std::unique_ptr<ReplicatedCheckpoint> replicated_;  // the checkpoint facet's default
};

}  // namespace cohort::parallel
