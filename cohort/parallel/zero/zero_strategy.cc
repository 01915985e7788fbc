// The "zero" strategy: ZeroEngine behind the Strategy seam, with its config keys.
#include "cohort/parallel/zero/zero_strategy.h"

#include "cohort/parallel/builtin_strategies.h"

namespace cohort::parallel {
namespace {

void add_zero_keys(ConfigRegistry& r) {
  r.add({"zero.stage",
         ConfigType::kInt,
         int64_t(1),
         "What each rank keeps only its 1/N of: 1 optimizer state, 2 also gradients, 3 also "
         "parameters (gathered around each module's use) (docs/zero.md).",
         "",
         {},
         1.0,
         3.0});
  r.add({"zero.unit_mb",
         ConfigType::kFloat,
         1.0,
         "Parameters travel in units: a module whose parameters (with those below it) fit in "
         "this many MiB is one unit, a larger one is split by child module. A unit is reduced "
         "as soon as backward finished it; stage 3 gathers one unit at a time.",
         "",
         {},
         0.001});
  r.add({"zero.prefetch", ConfigType::kBool, true,
         "Stage 3: gather the next unit's parameters while the current one computes."});
}

}  // namespace

ZeroOptions zero_options_from(const Config& cfg) {
  ZeroOptions o;
  o.stage = int(cfg.get_int("zero.stage"));
  o.unit_mb = cfg.get_float("zero.unit_mb");
  o.prefetch = cfg.get_bool("zero.prefetch");
  // In-place recovery (the trainer's elastic keys, when the registry has them) needs every
  // shard on two ranks.
  o.redundant = cfg.registry().find("elastic.min_workers") != nullptr &&
                cfg.get_int("elastic.min_workers") > 0;
  return o;
}

ZeroStrategy::ZeroStrategy(const StrategyContext& ctx, ZeroOptions options)
    : Strategy(ctx),
      engine_(std::make_shared<ZeroEngine>(ctx.model, ctx.optimizer, ctx.group, options)) {
  engine_->install();
}

ZeroStrategy::~ZeroStrategy() {
  engine_->drain();
}

void ZeroStrategy::backward(const Tensor& loss, bool sync) {
  const comm::ProcessGroup* g = group_.get();
  uint64_t sent = g ? g->bytes_sent() : 0, received = g ? g->bytes_received() : 0;
  double comm0 = engine_->comm_s(), exposed0 = engine_->exposed_s();
  engine_->set_sync(sync);
  try {
    loss.backward();
  } catch (...) {
    engine_->abandon_pass();
    throw;
  }
  if (!sync) return;
  stats_ = {.comm_s = engine_->comm_s() - comm0,
            .exposed_s = engine_->exposed_s() - exposed0,
            .bytes_sent = g ? g->bytes_sent() - sent : 0,
            .bytes_received = g ? g->bytes_received() - received : 0};
}

nlohmann::json ZeroStrategy::summary_metrics() const {
  int64_t shard_elems = 0;
  for (const auto& u : engine_->units()) shard_elems += u.layout.shard_size();
  return {{"zero_stage", engine_->stage()},
          {"zero_units", engine_->units().size()},
          {"zero_shard_numel", shard_elems}};
}

CheckpointPieces ZeroStrategy::pieces() const {
  const int rank = group_ ? group_->rank() : 0;
  CheckpointPieces out;
  if (rank == 0) out.pieces = whole_pieces("model", model_.state_dict());
  for (ckpt::TensorPiece& p : engine_->optimizer_pieces()) {
    p.shard = rank;
    out.pieces.push_back(std::move(p));
  }
  out.optimizer_scalars = engine_->optimizer_scalars();
  return out;
}

void ZeroStrategy::prepare_checkpoint() {
  engine_->gather_all();  // stage 3: the full parameters, for the model's state_dict
}

void ZeroStrategy::trace_to(metrics::Tracer* /*tracer*/) {
  engine_->chain_scope_observers();  // the trace just put its scopes on the modules
}

StrategyRegistration zero_strategy_registration() {
  return {.name = "zero",
          .description =
              "sharded data parallel (ZeRO stages 1-3): optimizer state, gradients "
              "and parameters split over the ranks",
          .add_keys = add_zero_keys,
          .make = [](const StrategyContext& ctx) -> std::unique_ptr<Strategy> {
            return std::make_unique<ZeroStrategy>(ctx, zero_options_from(ctx.config));
          }};
}

}  // namespace cohort::parallel
