#pragma once
// Internal to train/: what a checkpoint holds of a training run, and putting it back.
//
// A checkpoint is written after step s completes (state "step" = s). It holds everything that
// decides the run from there on, so that a resumed run is bit-identical to an uninterrupted
// one (same world size and thread count):
//   model.safetensors      parameters and buffers (Module::state_dict names), the dropout
//                          call counters among them ("<module>.rng_counter": the only RNG
//                          state, every other draw is counter-based from run.seed)
//   optimizer.safetensors  optimizer slots ("<param>.<slot>", Optimizer::export_state)
//   state.json             step, epoch, batches of that epoch already consumed (the sampler
//                          position), optimizer scalars (per-parameter step counts, lr),
//                          running loss average, world size, and the config the run used.
//                          (Older checkpoints also hold "dropout_counters" here: see
//                          checkpoint_model_state.)
//   strategy.rank<R>.safetensors  a strategy's per-rank state (StrategyState::per_rank: error-
//                          feedback residuals, a gossip worker's own parameters), one file per
//                          rank, sent to rank 0 when the checkpoint is taken
// Only rank 0 writes (parameters and optimizer state are identical on every rank); every rank
// reads the same directory on resume, and its own strategy.rank<R> file.
#include <optional>
#include <string>
#include <vector>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/ckpt/sharded.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// The strategy's state to checkpoint (StrategySnapshot, trainer_state.h): on rank 0, with
// every rank's tensors when it is per-rank (gathered over the group: collective, every rank
// calls it at the same steps).
StrategySnapshot snapshot_strategy(Trainer::State& s);
ckpt::CheckpointData capture_checkpoint(const Trainer::State& s, const LoopPosition& pos,
                                        const StrategySnapshot& strategy);
// The model's state_dict a checkpoint holds: model.safetensors, plus the dropout counters of a
// checkpoint written before they were module state (state.json "dropout_counters").
nn::StateDict checkpoint_model_state(const ckpt::CheckpointData& d, const ckpt::ShardedView& view);
inline nn::StateDict checkpoint_model_state(const ckpt::CheckpointData& d) {
  return checkpoint_model_state(d, ckpt::ShardedView(d));
}
// Restores model (dropout counters included), optimizer and loop state into s; returns where
// the loop resumes.
LoopPosition restore_checkpoint(Trainer::State& s, const ckpt::CheckpointData& d);
// Where the loop resumes in this run's batches: `restored` (restore_checkpoint's result) when
// the checkpoint's run split its global batch (data.batch_size x workers x grad_accum) into
// loader batches the same way; else the position of the same number of samples consumed, in
// this run's batches (restore_checkpoint has already refused a position that does not convert).
LoopPosition resume_position(const Trainer::State& s, const ckpt::CheckpointData& d,
                             const LoopPosition& restored);

// The checkpoint to resume from, per run.resume ("auto", a path, or empty) and the restart
// count; nullopt for a fresh start. Rank 0 chooses; every rank loads the same step directory
// (the choice travels through the process group when distributed).
std::optional<ckpt::CheckpointData> find_resume_checkpoint(Trainer::State& s);

}  // namespace cohort::train
