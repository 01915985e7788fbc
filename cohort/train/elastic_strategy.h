#pragma once
// What a membership change means for each strategy that recovers in place (docs/elastic.md):
//   ddp        the replicas are equal: the strategy is rebuilt over the new world, no state
//              moves;
//   local_sgd  the replicas parted since the last average: the members average them over the
//   gossip     new world (the average the failure interrupted, or an extra one; for gossip the
//              consensus its rounds approach, its neighbour estimates start afresh), and the
//              strategy keeps its step count (warm-up, period and codec rounds go on);
//   zero       each rank keeps its neighbour's shard (zero_engine.h): the members assemble the
//              full parameters and optimizer state from their shards and the lost ranks'
//              copies, and the new strategy shards them over the new world, as a resume from
//              a checkpoint at that world size would (the full state is held on every member
//              meanwhile). A joiner receives the full state from rank 0 the same way.
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// The strategies in-place recovery supports, for the config check's message.
inline constexpr const char* kElasticStrategies = "\"ddp\", \"zero\", \"local_sgd\" or \"gossip\"";
bool recovers_in_place(const std::string& strategy);

// local_sgd and gossip: each worker steps alone, so the replicas part between averages.
bool replicas_part(const Trainer::State& s);

// A local_sgd or gossip step whose optimizer step ran before its exchange failed: the step's
// bookkeeping is completed (s.step and s.pos move on), so the members do not train it twice.
void complete_interrupted_step(Trainer::State& s);

// local_sgd, gossip: every member's parameters and floating-point buffers replaced by their
// average over s.world's group (what local_sgd's own average covers; for gossip the consensus
// its rounds approach). Collective; nothing for the other strategies.
void average_parted_replicas(Trainer::State& s);

// zero: the model's parameters whole again and the full optimizer state in s.opt, assembled
// over s.world's group from the shards of `members` (old ranks, in the group's order) and the
// copies of the others kept by their neighbours. Collective; nothing for the other strategies.
void gather_sharded_state(Trainer::State& s, const std::vector<int>& members);

// The strategy over s.world's new group: the replicas averaged first when `average_replicas`
// (after a loss; a join averages over the old world before it forms the new one), then a new
// strategy, then after_new_strategy, which a worker joining the running job calls too once it
// has made its strategy.
void rebuild_strategy(Trainer::State& s, bool average_replicas);
void after_new_strategy(Trainer::State& s);

}  // namespace cohort::train
