#pragma once
// The registry `parallel.strategy` selects from. Built in: "ddp" (the default; a job of one
// process runs it as "none"), "none" (single-process training) and "local_sgd"
// (local_sgd_strategy.h; the trainer adds "ps", which lives above parallel/). A program adds its
// own before the configuration is first read (examples/local_sgd_strategy.cpp):
//
//   parallel::register_strategy({
//       .name = "local_sgd_example",
//       .description = "average parameters every H steps",
//       .add_keys = [](ConfigRegistry& r) { r.add({"local_sgd_example.period", ...}); },
//       .make = [](const parallel::StrategyContext& c) { return std::make_unique<Mine>(c); }});
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/core/config.h"
#include "cohort/parallel/strategy.h"

namespace cohort::parallel {

struct StrategyRegistration {
  std::string name;
  std::string description;  // one line, for docs and "unknown strategy" errors
  // Declares the strategy's own config keys (its section); may be empty.
  std::function<void(ConfigRegistry&)> add_keys;
  // Builds the strategy; ctx.group is null for a job of one process.
  std::function<std::unique_ptr<Strategy>(const StrategyContext&)> make;
};

// InvalidArgument for an empty or already registered name, a missing factory, or a call after
// the configuration registry was built (its keys could no longer be declared).
void register_strategy(StrategyRegistration registration);

// Builds the strategy called `name`; InvalidArgument listing the registered names otherwise.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyContext& ctx);

// Registered names, sorted.
std::vector<std::string> strategy_names();

// Declares every registered strategy's keys; afterwards register_strategy refuses (the
// trainer's registry calls this once, when it is built).
void add_strategy_keys(ConfigRegistry& registry);

}  // namespace cohort::parallel
