#include "cohort/parallel/strategy_registry.h"

#include <map>
#include <mutex>

#include "cohort/parallel/builtin_strategies.h"

namespace cohort::parallel {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, StrategyRegistration> entries;
  bool keys_declared = false;  // add_strategy_keys ran: no more registrations

  Registry() {
    for (StrategyRegistration& r : builtin_strategies()) entries.emplace(r.name, std::move(r));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string names_list(const std::map<std::string, StrategyRegistration>& entries) {
  std::string out;
  for (const auto& [name, r] : entries) {
    out += detail::str(out.empty() ? "" : ", ", "'", name, "' (", r.description, ")");
  }
  return out;
}

}  // namespace

void register_strategy(StrategyRegistration registration) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  const std::string& name = registration.name;
  COHORT_CHECK_ARG(!name.empty(), "register_strategy: empty name");
  COHORT_CHECK_ARG(registration.make != nullptr, "register_strategy: '", name,
                   "' has no factory (make)");
  COHORT_CHECK_ARG(!reg.entries.count(name), "register_strategy: '", name,
                   "' is already registered");
  COHORT_CHECK_ARG(!reg.keys_declared, "register_strategy: '", name,
                   "' registered after the configuration keys were declared; register "
                   "strategies at the start of main, before reading any config");
  reg.entries.emplace(name, std::move(registration));
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyContext& ctx) {
  std::function<std::unique_ptr<Strategy>(const StrategyContext&)> make;
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.entries.find(name);
    COHORT_CHECK_ARG(it != reg.entries.end(), "parallel.strategy: unknown strategy '", name,
                     "'; registered: ", names_list(reg.entries));
    make = it->second.make;
  }
  return make(ctx);
}

StrategyWorld strategy_world(const std::string& name) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.entries.find(name);
  return it == reg.entries.end() ? StrategyWorld{} : it->second.world;
}

std::string mesh_strategy() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (const auto& [name, r] : reg.entries)
    if (r.world.on_mesh == name) return name;
  return "";
}

std::vector<std::string> strategy_names() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::vector<std::string> out;
  for (const auto& [name, r] : reg.entries) out.push_back(name);
  return out;
}

void add_strategy_keys(ConfigRegistry& config) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.keys_declared = true;
  for (const auto& [name, r] : reg.entries) {
    if (r.add_keys) r.add_keys(config);
  }
}

}  // namespace cohort::parallel
