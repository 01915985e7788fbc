#pragma once
// Internal to parallel/: the strategies the registry starts with (strategy_registry.cc).
#include <memory>
#include <vector>

#include "cohort/parallel/strategy_registry.h"

namespace cohort::parallel {

StrategyRegistration none_strategy_registration();  // strategy.cc
// "none" itself, for strategies that run single-process jobs without communicating.
std::unique_ptr<Strategy> make_none_strategy(const StrategyContext& ctx);
// Its name: what a one-process job of most strategies runs as.
inline constexpr char kSingleProcessStrategy[] = "none";
StrategyRegistration ddp_strategy_registration();             // ddp_strategy.cc
StrategyRegistration local_sgd_strategy_registration();       // local_sgd_strategy.cc
StrategyRegistration gossip_strategy_registration();          // gossip_strategy.cc
StrategyRegistration zero_strategy_registration();            // zero_strategy.cc
StrategyRegistration model_parallel_strategy_registration();  // model_parallel_model.cc

inline std::vector<StrategyRegistration> builtin_strategies() {
  return {none_strategy_registration(),      ddp_strategy_registration(),
          local_sgd_strategy_registration(), gossip_strategy_registration(),
          zero_strategy_registration(),      model_parallel_strategy_registration()};
}

}  // namespace cohort::parallel
