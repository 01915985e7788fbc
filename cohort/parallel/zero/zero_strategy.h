#pragma once
// The "zero" strategy (strategy.h): sharded data parallelism, ZeRO stages 1-3 (zero_engine.h
// for the mechanism, docs/zero.md for the guide). Like DDP, every rank trains on its own
// micro-batches and a step equals one process stepping on the combined batch; unlike DDP, each
// rank keeps only its 1/N of the optimizer state (stage 1), of the gradients (stage 2) and of
// the parameters between uses (stage 3). Its keys are the [zero] section (docs/config.md).
//
//   parallel::ZeroStrategy s({model, opt, group, cfg}, {.stage = 2});
//   s.zero_grad();
//   s.backward(nn::cross_entropy(s.forward(x), y), /*sync=*/true);
//   s.clip_grad_norm(1.0);  // the global norm, over every rank's shard
//   s.step();
//
// `opt` (SGD or AdamW) supplies the kind, the hyperparameters and the learning rate (set_lr on
// it, as a schedule does, reaches the shards at the next step); it is never stepped itself.
#include <memory>

#include "cohort/parallel/strategy.h"
#include "cohort/parallel/zero/zero_engine.h"

namespace cohort::parallel {

// ZeroOptions from the [zero] keys of `cfg`.
ZeroOptions zero_options_from(const Config& cfg);

// Checkpoints: the model whole from rank 0 (prepare_checkpoint gathers ZeRO-3's parameters),
// the optimizer state in pieces as each rank's shard holds it.
class ZeroStrategy : public Strategy,
                     public StrategyCheckpoint,
                     public StrategyMetrics,
                     public StrategyLifecycle {
 public:
  // Collective: checks the ranks' parameters agree and copies rank 0's; shards them.
  ZeroStrategy(const StrategyContext& ctx, ZeroOptions options);
  ~ZeroStrategy() override;
  std::string name() const override { return "zero"; }
  Tensor forward(const Tensor& x) override { return model_(x); }
  void backward(const Tensor& loss, bool sync) override;
  double clip_grad_norm(double max_norm) override { return engine_->clip_grad_norm(max_norm); }
  void step() override { engine_->step(optimizer_.lr()); }
  void zero_grad() override { engine_->zero_grad(); }
  StrategyStats last_stats() const override { return stats_; }
  nlohmann::json summary_metrics() const override;
  void prepare_checkpoint() override;
  void finish_training() override { engine_->hold_gathered(); }
  CheckpointPieces pieces() const override;
  void load(const CheckpointSource& from) override {
    engine_->load_model(from.whole_model());
    engine_->load_optimizer(from.view, from.optimizer_scalars);
  }
  void shutdown() noexcept override { engine_->drain(); }
  void trace_to(metrics::Tracer* tracer) override;

  ZeroEngine& engine() { return *engine_; }

 private:
  std::shared_ptr<ZeroEngine> engine_;
  StrategyStats stats_;
};

}  // namespace cohort::parallel
