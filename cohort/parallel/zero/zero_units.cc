#include "cohort/parallel/zero/zero_units.h"

#include <optional>
#include <unordered_set>

namespace cohort::parallel {
namespace {

struct Planner {
  int64_t max_numel;
  std::unordered_set<const TensorImpl*> taken;
  std::vector<UnitPlan> units;

  static std::string join(const std::string& prefix, const std::string& name) {
    return prefix.empty() ? name : prefix + "." + name;
  }

  // Adds the untaken parameters of `params` (names relative to `prefix`) as one unit; one
  // already taken by an earlier unit is a shared parameter (recorded in `shared`).
  void add_unit(const std::string& prefix, nn::Module* module, const nn::NamedTensors& params) {
    UnitPlan u{prefix, module, {}};
    for (const auto& [name, t] : params) {
      if (taken.insert(&t.impl()).second) {
        u.params.emplace_back(join(prefix, name), t);
      } else if (!shared) {
        shared = join(prefix, name);
      }
    }
    if (!u.params.empty()) units.push_back(std::move(u));
  }
  std::optional<std::string> shared;

  // The module's own parameters: its named_parameters() less those of its children.
  static nn::NamedTensors direct_params(nn::Module& m) {
    std::unordered_set<std::string> below;
    for (const auto& [child_name, child] : m.named_children()) {
      for (const auto& [name, t] : child->named_parameters()) below.insert(join(child_name, name));
    }
    nn::NamedTensors out;
    for (auto& [name, t] : m.named_parameters()) {
      if (!below.count(name)) out.emplace_back(name, t);
    }
    return out;
  }

  void plan(const std::string& prefix, nn::Module& m) {
    if (m.named_children().empty() || m.num_parameters() <= max_numel) {
      add_unit(prefix, &m, m.named_parameters());
      return;
    }
    add_unit(prefix, &m, direct_params(m));
    for (const auto& [name, child] : m.named_children()) plan(join(prefix, name), *child);
  }
};

}  // namespace

std::vector<UnitPlan> plan_units(nn::Module& root, int64_t max_unit_numel,
                                 std::optional<std::string>* shared) {
  Planner p{max_unit_numel, {}, {}, {}};
  p.plan("", root);
  if (shared) *shared = p.shared;
  return std::move(p.units);
}

}  // namespace cohort::parallel
