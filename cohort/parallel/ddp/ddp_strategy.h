#pragma once
// The "ddp" strategy (strategy.h): DDP (ddp.h) behind the Strategy seam. Gradient accumulation
// runs the micro-batches before the last under no_sync; the last one's backward averages the
// accumulated sum. Its keys are the [ddp] section (docs/config.md).
#include <optional>

#include "cohort/parallel/ddp/compression_hook.h"
#include "cohort/parallel/ddp/ddp.h"
#include "cohort/parallel/ddp/powersgd_hook.h"
#include "cohort/parallel/strategy.h"

namespace cohort::parallel {

// DdpOptions from the [ddp] keys of `cfg`.
DdpOptions ddp_options_from(const Config& cfg);
// The compression hook's options from ddp.compression and its knobs; nullopt for "none".
// InvalidArgument naming the key for a value out of range (or for "powersgd": see below).
std::optional<CompressionOptions> compression_options_from(const Config& cfg);
// PowerSGD's options from ddp.powersgd_rank, ddp.powersgd_start_step, ddp.error_feedback.
PowerSgdOptions powersgd_options_from(const Config& cfg);
// The hook ddp.compression asks for (CompressionHook or PowerSgdHook); null for "none".
std::shared_ptr<CommHook> compression_hook_from(const Config& cfg);

class DdpStrategy : public Strategy, public ReplicatedCheckpoint, public StrategyMetrics {
 public:
  // Collective (DDP's construction): broadcasts rank 0's parameters.
  DdpStrategy(const StrategyContext& ctx, DdpOptions options);
  std::string name() const override { return "ddp"; }
  Tensor forward(const Tensor& x) override { return ddp_(x); }
  void backward(const Tensor& loss, bool sync) override;
  StrategyStats last_stats() const override;
  // The comm hook's metrics (compression: compress_ratio, compress_encode_ms, ...).
  nlohmann::json take_interval_metrics() override;
  nlohmann::json summary_metrics() const override;
  // The comm hook's state, tagged with its name (a checkpoint of another hook restores
  // nothing into this one).
  StrategyState state() const override;
  void load_state(const StrategyState& state) override;
  void trace_to(metrics::Tracer* tracer) override;
  DDP& ddp() { return ddp_; }

 private:
  DDP ddp_;
};

}  // namespace cohort::parallel
