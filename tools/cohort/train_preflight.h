#pragma once
// Checks of a training config that need neither data nor a running job, made by `cohort train`
// before it starts anything: a mistake is then reported once, in a line naming the key, rather
// than by every worker after start-up (and again in the launcher's summary of the failed rank).
#include "cohort/core/config.h"

namespace cohort::cli {

// parallel.strategy names a registered strategy; else InvalidArgument with the value, the
// choices and a "did you mean". (parallel::make_strategy would find it too, but only in the
// workers, with every strategy's description: a line of hundreds of characters.)
void check_strategy_name(const Config& cfg);

// check_strategy_name, then the combinations the trainer refuses before loading data
// (train::check_combination: model and dataset, ...) and the mesh parallel.dp x pp x tp against
// the `workers` the launcher is about to start.
void check_config_before_launch(const Config& cfg, int workers);

}  // namespace cohort::cli
