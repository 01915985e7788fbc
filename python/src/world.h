#pragma once
// cohort._core.join, available_backends and cohort.World (world.cc).
#include <pybind11/pybind11.h>

namespace cohort::pybind {

void register_world(pybind11::module_& m);

}  // namespace cohort::pybind
