#pragma once
// Elastic training's fixed global batch and exact mode (elastic.fixed_batch, elastic.exact;
// docs/elastic.md).
//
// The global batch of an elastic job is K slots of data.batch_size samples, K = the workers the
// launcher started (COHORT_WORLD_SIZE): slot k draws from DistributedSampler(k, K), so the data
// of a step does not depend on how many workers are alive. With W workers, worker r computes
// slots r, r + W, ... (parallel/ordered_mean.h: slots_of_rank), one micro-batch each, and the
// step's gradient stays the mean over the K slots: a lost worker's slots are taken over by the
// others (gradient accumulation), a joining worker takes its share back, and the position in
// the epoch means the same for every membership, so a change moves no sample.
//
// Fixed batch alone combines the slots with DDP's allreduce: each micro-batch weighted W / K,
// averaged over the W workers, gives the mean over the K slots, up to the order of the float
// sums. elastic.exact also fixes that order: each slot's gradient is kept apart and they are
// summed in slot order whoever computed them (ordered_slot_mean), so a run that loses and
// regains workers ends with the bits of a run that did not.
#include <cstdint>
#include <vector>

#include "cohort/parallel/strategy.h"
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// K for this job (the workers the launcher started), or 0 when the global batch is not fixed
// (not an elastic job, elastic.fixed_batch = false, or a shard directory). Text data: slot k of
// a step is rows k * data.batch_size onwards of the step's random windows (TextDataset).
int64_t fixed_batch_slots(const Trainer::State& s);

// The slots this worker computes in the current world, in order.
std::vector<int64_t> own_slots(const Trainer::State& s);

// The weight of each of this worker's micro-batches: W / K under DDP and ZeRO (their average
// over the W workers then weighs every slot 1 / K); 1 / (its slots) under local_sgd and gossip,
// whose workers step alone on the mean of their slots (the warm-up's gradient average weighs
// workers alike).
double slot_weight(const Trainer::State& s);

// The forward and backward passes every worker runs per step when they must run in lockstep:
// ZeRO-3 gathers parameters in every pass (a collective), so a worker with fewer slots than
// another runs as many passes, the extra ones weighted 0. 0 when each runs its own slots.
int64_t lockstep_passes(const Trainer::State& s);

// Samples under a fixed global batch: each step counts the job's K x slot samples in s.samples
// (the same on every worker, whatever the membership was), and gives the energy account this
// worker's share of them (the shares of the W workers sum to the job's exactly).
int64_t slot_samples_share(const Trainer::State& s, int64_t slot_samples);
// What s.samples is multiplied by for the job's samples: 1 under a fixed global batch (it counts
// the job's already), else the data-parallel workers.
int64_t samples_scale(const Trainer::State& s);

// The workers of the data split a checkpoint records: K slots, whoever computed them.
int64_t data_split_workers(const Trainer::State& s);

// elastic.exact's forward and backward: each micro-batch (slot own_slots()[j]) computed on its
// own, the gradients combined by ordered_slot_mean into every parameter's .grad; the loss is
// the mean over this worker's micro-batches. Adds the exchange's time and bytes to `comm`.
parallel::ForwardBackwardResult exact_forward_backward(Trainer::State& s,
                                                       const std::vector<parallel::MicroBatch>& mb,
                                                       parallel::StrategyStats& comm);

// Refuses elastic.exact for a model whose buffers (batch-norm statistics, dropout counters)
// would follow the micro-batches each worker happened to compute, naming the first.
void check_exact_model(const Trainer::State& s);

}  // namespace cohort::train
