#pragma once
// Internal to train/: the state Trainer's files share. Not part of the public API.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/metrics/sink.h"
#include "cohort/metrics/trace.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/schedule.h"
#include "cohort/parallel/strategy.h"
#include "cohort/train/components.h"
#include "cohort/train/energy_account.h"
#include "cohort/train/init_weights.h"
#include "cohort/train/memory_account.h"
#include "cohort/train/step_metrics.h"
#include "cohort/train/straggler.h"
#include "cohort/train/trainer.h"
#include "cohort/train/world.h"

namespace cohort::train {

using Clock = std::chrono::steady_clock;

// What the strategy's checkpoint facet gave for the checkpoint being taken, on rank 0
// (checkpointing.h, snapshot_strategy): its state, every rank's tensors when it is per-rank,
// and the model and optimizer as pieces.
struct StrategySnapshot {
  parallel::StrategyState state;
  std::vector<NamedTensors> per_rank;    // by rank, on rank 0; empty unless state.per_rank
  std::vector<ckpt::TensorPiece> whole;  // rank 0's whole tensors (shard -1)
  // Every rank's other pieces, by rank; all empty when every tensor is whole.
  std::vector<std::vector<ckpt::TensorPiece>> pieces;
  std::map<std::string, double> optimizer_scalars;
};

// The strategy's optional facets, with what a strategy without them means.
inline parallel::StrategyStats strategy_stats(parallel::Strategy& s) {
  parallel::StrategyMetrics* m = s.metrics();
  return m ? m->last_stats() : parallel::StrategyStats{};
}
inline void finish_strategy_training(parallel::Strategy& s) {
  if (parallel::StrategyLifecycle* l = s.lifecycle()) l->finish_training();
}

// Where the loop stands when a checkpoint is taken or restored.
struct LoopPosition {
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;  // batches of `epoch` already trained on (per rank)
  // Samples of `epoch` trained on before this split of the job began (elastic training dealt
  // the rest of the epoch to the workers left: the sampler's skip); batch_in_epoch counts after.
  int64_t skip = 0;
  bool operator==(const LoopPosition&) const = default;
};

struct Trainer::State {
  Config cfg;
  rendezvous::EnvMap env;  // the environment the trainer started with (strategies read it)
  // Before everything that allocates: run.memory_limit_mb covers building the model too.
  MemoryAccount memory;
  std::unique_ptr<TrainWorld> world;  // first: outlives the DDP that uses its group
  DataSplits data;
  std::shared_ptr<const parallel::DeviceMesh> mesh;  // when the model is split over ranks
  std::shared_ptr<nn::Module> model;
  Device device;  // run.device: the model, its optimizer state and every batch live there
  // train.precision = "bf16": the products' precision for the whole run (ops/ops.h).
  std::unique_ptr<ops::MatmulPrecisionScope> precision;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LrSchedule> schedule;
  metrics::Recorder log;     // every record of this rank goes here (its JSONL file, ...)
  std::string metrics_file;  // this rank's JSONL file
  std::unique_ptr<metrics::Sink> stream;  // to the dashboard; joins `log` in start_run
  // run.trace (run_trace.h); null when off. Before the strategy, which holds a pointer to it;
  // the modules' scopes hold the observer weakly.
  std::unique_ptr<metrics::Tracer> tracer;
  std::shared_ptr<autograd::ScopeObserver> module_tracer;
  // Declared after the model and optimizer, so destroyed before them.
  std::unique_ptr<parallel::Strategy> strategy;   // parallel.strategy ("none" for one process)
  std::unique_ptr<ckpt::CheckpointManager> ckpt;  // rank 0 writes; every rank may read
  StepMetrics metrics;
  StragglerWatch stragglers;  // metrics.straggler_*; off without a group
  EnergyAccount energy;       // energy.*: this rank's joules per step (energy_account.h)
  std::string run_dir;
  int64_t batch = 0;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  int64_t batches_per_epoch = 0;  // this rank's micro-batches per epoch (text: steps * accum)
  int64_t grad_accum = 1;         // train.grad_accum_steps: micro-batches per step
  int64_t batch_slots = 0;        // elastic's fixed global batch: its slots (fixed_batch.h); 0: off
  int64_t step = 0;
  double train_seconds = 0;
  int64_t samples = 0;
  double loss_ema = 0;
  EvalResult last_eval;
  InitReport init_weights;  // model.init_from: what was loaded
  Clock::time_point start;

  int64_t last_saved_step = -1;
  StrategySnapshot pending_strategy;  // prepare_checkpoint -> write_checkpoint
  LoopPosition last_saved_pos;      // a step's checkpoint is rewritten when the epoch ends after it
  int64_t start_step = 0;           // step the run resumed from (0: fresh)
  LoopPosition resume_pos;          // where this run starts (a checkpoint's position, or 0/0)
  LoopPosition pos;                 // after the last step: what a checkpoint taken now records
  int elastic_generation = 0;       // membership changes so far (train/elastic.h)
  double elastic_recover_s = 0;     // their recovery times, summed
  bool joined_running_job = false;  // respawned into the job: its state came from rank 0
  int64_t elastic_joins_seen = 0;   // rank 0: the store's join counter when last looked

  explicit State(const Config& c) : cfg(c), memory(cfg) {}
  // train.time_limit_s reached; in a distributed run rank 0 decides for everyone, so that all
  // ranks stop after the same step.
  bool out_of_time();
};

// Creates <run.dir>/<run.name>; the chief also writes config.toml there.
std::string make_run_dir(const Config& cfg, bool write_config);

}  // namespace cohort::train
