// cohort._core: the C++ half of the Python package (python/cohort/ is the other half, and the
// API users import). Errors first: the other registrations' defaults may raise them.
#include <pybind11/pybind11.h>

#include "python/src/errors.h"
#include "python/src/group.h"
#include "python/src/world.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "cohort's C++ core: joining the job, the ProcessGroup's operations, errors";
  cohort::pybind::register_errors(m);
  cohort::pybind::register_group(m);
  cohort::pybind::register_world(m);
}
