#pragma once
// Internal to the zero strategy: which parameters travel together.
//
// A unit is a module's parameters, gathered (stage 3) around that module's forward and
// backward, and reduced together once backward produced all their gradients (every stage). The
// plan walks the module tree in registration order (the order forward runs in for sequential
// models): a module whose parameters, counting every module below it, fit in
// `max_unit_numel` (or that has no children) is one unit; a larger one contributes a unit of
// its own direct parameters, if any, and each child is planned the same way. A parameter shared
// by several modules belongs to the first unit that holds it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/nn/module.h"

namespace cohort::parallel {

struct UnitPlan {
  std::string name;         // the module's full name ("" for the root), for errors and traces
  nn::Module* module;       // whose forward brackets the unit's use of its parameters
  nn::NamedTensors params;  // full names, registration order
};

// `shared`, when given, gets the name (in the unit that did not get it) of the first parameter
// that modules of two units share (tied weights), or nullopt.
std::vector<UnitPlan> plan_units(nn::Module& root, int64_t max_unit_numel,
                                 std::optional<std::string>* shared = nullptr);

}  // namespace cohort::parallel
