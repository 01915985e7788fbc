#pragma once
// The "local_sgd" strategy (strategy.h): local SGD and post-local SGD (Lin et al., "Don't Use
// Large Mini-Batches, Use Local SGD", ICLR 2020). Keys: the [local_sgd] section.
//
//   steps 1 .. W (warm-up, local_sgd.warmup_steps = W): synchronous data parallelism: the synced
//     backward averages the gradients across ranks (one allreduce of all of them, flattened),
//     then every rank takes the same optimizer step. W = 0: no warm-up (plain local SGD).
//   steps after W: every rank steps alone on its own data; after step W + k*H
//     (local_sgd.period = H) the ranks average their parameters and floating-point buffers
//     (BatchNorm statistics) with one allreduce(avg) of them flattened. Integer buffers (step
//     counters, dropout counters) are the same on every rank by construction and not averaged.
//
// Optimizer state: each rank keeps its own (momentum, Adam moments) between averages, as in the
// paper; local_sgd.average_optimizer_state = true averages it too at every parameter average.
//
// Checkpoints: rank 0 writes them, so before every checkpoint (prepare_checkpoint) the ranks
// average parameters, buffers and optimizer state, unless nothing changed since they last did.
// A checkpoint is thus a synchronization point: every rank holds what rank 0 saves, and a run
// resumed from it continues exactly like the uninterrupted run (which synchronized at the same
// step). The price: checkpoint steps off the period's boundaries add averages to the schedule.
//
// Metrics (take_interval_metrics, per logged step): local_sgd_phase ("warmup" | "local": of the
// step just taken),
// local_sgd_steps_since_average, local_sgd_averages (in the interval), local_sgd_bytes_per_step
// (bytes sent, amortized over the interval's steps), and with local_sgd.report_params_hash a
// hash of the parameters whenever the replicas agree (tests compare it across ranks).
#include <chrono>
#include <vector>

#include "cohort/parallel/flat_average.h"
#include "cohort/parallel/strategy.h"
#include "cohort/parallel/strategy_registry.h"

namespace cohort::parallel {

struct LocalSgdOptions {
  int64_t period = 4;        // H: optimizer steps between parameter averages, >= 1
  int64_t warmup_steps = 0;  // W: synchronous (gradient-averaging) steps first, >= 0
  bool average_optimizer_state = false;
  bool report_params_hash = false;
  std::chrono::milliseconds timeout{0};  // per collective; 0: the group's default
};

// LocalSgdOptions from the [local_sgd] keys of `cfg`; InvalidArgument naming a bad key.
LocalSgdOptions local_sgd_options_from(const Config& cfg);

class LocalSgdStrategy : public Strategy, public ReplicatedCheckpoint, public StrategyMetrics {
 public:
  // Collective: checks that every rank has the same parameters and buffers (names, shapes,
  // dtypes) and copies rank 0's to every rank. ctx.group must not be null.
  LocalSgdStrategy(const StrategyContext& ctx, LocalSgdOptions options);
  std::string name() const override { return "local_sgd"; }
  // In the warm-up, the synced backward averages the gradients; otherwise no communication.
  void backward(const Tensor& loss, bool sync) override;
  // The optimizer step, then the parameter average when the step ends a period.
  void step() override;
  void prepare_checkpoint() override;
  StrategyStats last_stats() const override;
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override;
  // The step count and the step of the last average (the same on every rank).
  StrategyState state() const override;
  void load_state(const StrategyState& state) override;

  int64_t steps() const { return steps_; }
  // 0 in the warm-up (gradients are averaged every step) and right after an average.
  int64_t steps_since_average() const { return steps_ - synced_at_; }
  bool in_warmup() const { return steps_ < options_.warmup_steps; }

 private:
  bool ends_period(int64_t step) const;
  void average_gradients();
  void average_parameters();
  void average_optimizer_state();
  void account(const FlatAverageStats& s);

  LocalSgdOptions options_;
  std::vector<Tensor> params_;   // distinct trainable parameters, model order
  std::vector<Tensor> replica_;  // params_ and the float buffers: what an average covers
  FlatAverager replica_averager_, grad_averager_, optimizer_averager_;
  int64_t steps_ = 0;
  // Steps after which the ranks last agreed: through a gradient or parameter average (metrics);
  // through a parameter-and-buffer average, and an optimizer-state average (checkpoints). At 0
  // they agree: rank 0's model was copied and no optimizer state exists yet.
  int64_t synced_at_ = 0;
  int64_t replicas_averaged_at_ = 0;
  int64_t optimizer_averaged_at_ = 0;
  FlatAverageStats pending_;  // communication of the step in progress
  StrategyStats last_;
  struct Totals {
    int64_t steps = 0, averages = 0;
    uint64_t bytes_sent = 0;
    double comm_s = 0;
  } interval_, run_;
};

// Its registration (built in: builtin_strategies.h); the keys are the [local_sgd] section.
StrategyRegistration local_sgd_strategy_registration();

}  // namespace cohort::parallel
