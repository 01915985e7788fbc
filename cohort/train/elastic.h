#pragma once
// In-place recovery (elastic.min_workers > 0, docs/elastic.md): when a collective of the
// training loop fails because a peer was lost (it died, or stopped beating: comm/liveness.h),
// the survivors agree on a new membership and go on from the last completed step with the
// state they hold, without restarting and without reading a checkpoint.
//
// The membership round of generation g, under "elastic/attempt<A>/gen<g>/" in the job's store:
//   1. the first survivor to fail sets "open" (its error): every other survivor's liveness
//      watchdog sees it within one look and fails its own collective, so all enter the round;
//   2. each survivor sets "member/<old rank>" = its last completed step;
//   3. once every old rank has arrived, or every rank still missing has stopped beating for
//      elastic.detect_s / 2, a survivor writes "members" (compare-and-set: the first list
//      written is the membership, for everyone); a worker not in it was dropped and stops;
//   4. the members, in the order of their old ranks, form a new communicator (prefix
//      "world/gen<g>") and rebuild the strategy over it (elastic_strategy.h); the data goes on
//      where it was: the slots of the fixed global batch dealt to the members (fixed_batch.h),
//      or with elastic.fixed_batch = false the rest of the epoch dealt to them (the sampler
//      skips what the old world trained on), the global batch shrinking with the workers.
// Rank 0 lost: the lowest member becomes rank 0 and writes the checkpoints and metrics.jsonl
// from then on (the launcher hosts the store, which outlives it).
// Refused (the job stops, as without elastic training): fewer than elastic.min_workers or than
// half of the old world left (a minority never goes on alone), or survivors whose last
// completed steps differ (a worker died inside a step's last collective: their replicas
// differ; a restart from the checkpoint is exact).
#include <string>

#include "cohort/train/trainer_state.h"

namespace cohort::train {

// Whether a failure of the training loop is one the survivors may recover from in place.
bool can_recover_in_place(const Trainer::State& s);

// Runs the membership round after `why` failed this worker's step; on return s.world (rank,
// size, group, liveness), s.strategy, s.stragglers, s.resume_pos and the step counts are those
// of the new world. Throws (naming why) when this worker cannot go on.
void recover_in_place(Trainer::State& s, const std::string& why);

// Checks the elastic keys against the rest of the config (before any worker starts).
void check_elastic_config(const Config& cfg);

// The store key whose appearance opens the membership round of `generation` (step 1 above):
// the liveness watchdog of the generation before watches it.
std::string elastic_round_key(int restart_count, int generation);

// Rank 0 of an elastic job, once training and the final checkpoint are done: sets the store's
// "elastic/attempt<A>/done", which a launcher whose own workers were all lost reads to tell a
// job that finished without them from one that failed (launch/elastic_notice.h).
void announce_job_done(Trainer::State& s);

// Thrown by the training step after the membership changed at a step boundary (workers joined,
// train/elastic_join.h): the loop starts again from s.resume_pos with the new world's loader.
struct MembershipChanged {};

// Shared by the two ways the membership changes (workers lost here, workers joining in
// elastic_join.cc).
std::string round_prefix(const Trainer::State& s, int generation);
// The new world's communicator (rank new_rank of new_size), group and watchdog.
void form_world(Trainer::State& s, int new_rank, int new_size, int generation);
// The rest of the epoch at s.pos, trained so far by `old_workers`, dealt to the new world; the
// run's step counts again.
void redeal_data(Trainer::State& s, int old_workers);
// Counts the change, logs it on rank 0 and writes the `membership` record.
void log_membership(Trainer::State& s, int generation, int previous, double took,
                    const std::string& why);

}  // namespace cohort::train
