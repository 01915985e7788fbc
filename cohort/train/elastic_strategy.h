#pragma once
// What a membership change means for each strategy that recovers in place (docs/elastic.md):
//   ddp        the replicas are equal: the strategy is rebuilt over the new world, no state
//              moves;
//   local_sgd  the replicas parted since the last average: the members average them over the
//              new world (the average the failure interrupted, or an extra one), and the
//              strategy keeps its step count (warm-up and period stay where they were).
#include "cohort/train/trainer_state.h"

namespace cohort::train {

// The strategies in-place recovery supports, for the config check's message.
inline constexpr const char* kElasticStrategies = "\"ddp\" or \"local_sgd\"";
bool recovers_in_place(const std::string& strategy);

// A local_sgd step whose optimizer step ran before its parameter average failed: the step's
// bookkeeping is completed (s.step and s.pos move on), so the members do not train it twice.
void complete_interrupted_step(Trainer::State& s);

// The strategy over s.world's new group, with what it carries across the change:
// before_new_strategy (collective over the new group), a new strategy, after_new_strategy. A
// worker joining the running job calls the first at the end of join_running_job and the last
// after making its strategy, so it takes part in the same collectives.
void rebuild_strategy(Trainer::State& s);
void before_new_strategy(Trainer::State& s);
void after_new_strategy(Trainer::State& s);

}  // namespace cohort::train
