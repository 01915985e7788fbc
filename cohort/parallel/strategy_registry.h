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

// World hooks: how a strategy shapes the world it runs in. The trainer reads them before the
// strategy exists (joining the job, building the mesh), so that train/ names no strategy.
struct StrategyWorld {
  // Whether the workers form a process group. False: each worker reaches the job's services
  // through the rendezvous store alone (parameter-server workers talk to servers, not peers).
  bool joins_group = true;
  // Which strategy runs when parallel.pp or parallel.tp split the model over a device mesh:
  // empty, such a split is refused; this strategy's own name, it always runs on a mesh (even
  // 1 x 1 x dp); another registered name, that strategy takes over when the model is split.
  std::string on_mesh;
};

// parallel.strategy's default.
inline constexpr char kDefaultStrategy[] = "ddp";

struct StrategyRegistration {
  std::string name;
  std::string description;  // one line, for docs and "unknown strategy" errors
  // Declares the strategy's own config keys (its section); may be empty.
  std::function<void(ConfigRegistry&)> add_keys;
  // Builds the strategy; ctx.group is null for a job of one process.
  std::function<std::unique_ptr<Strategy>(const StrategyContext&)> make;
  StrategyWorld world = {};
};

// InvalidArgument for an empty or already registered name, a missing factory, or a call after
// the configuration registry was built (its keys could no longer be declared).
void register_strategy(StrategyRegistration registration);

// Builds the strategy called `name`; InvalidArgument listing the registered names otherwise.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyContext& ctx);

// The world hooks of strategy `name`; the defaults (a group, no mesh) for a name not registered
// (make_strategy reports it).
StrategyWorld strategy_world(const std::string& name);
// The registered strategy that runs on a device mesh (StrategyWorld::on_mesh is its own name);
// empty when none is.
std::string mesh_strategy();

// Registered names, sorted.
std::vector<std::string> strategy_names();

// Declares every registered strategy's keys; afterwards register_strategy refuses (the
// trainer's registry calls this once, when it is built).
void add_strategy_keys(ConfigRegistry& registry);

}  // namespace cohort::parallel
