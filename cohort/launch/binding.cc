#include "cohort/launch/binding.h"

#include <sched.h>

#include "cohort/core/error.h"

namespace cohort::launch {

Bind parse_bind(const std::string& text) {
  if (text == "auto") return Bind::kAuto;
  if (text == "core") return Bind::kCore;
  if (text == "none") return Bind::kNone;
  throw InvalidArgument(
      cohort::detail::str("cohort run: --bind '", text, "' is not one of auto, core, none"));
}

std::vector<int> worker_cpus(Bind bind, int workers, const std::vector<int>& usable) {
  if (bind == Bind::kNone || workers <= 0) return {};
  bool fits = size_t(workers) <= usable.size();
  if (bind == Bind::kAuto && (!fits || workers < 2)) return {};
  COHORT_CHECK_ARG(fits, "cohort run: --bind core needs a CPU per worker: ", workers, " workers, ",
                   usable.size(), " usable CPUs (use --bind none)");
  return std::vector<int>(usable.begin(), usable.begin() + workers);
}

std::vector<int> usable_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace cohort::launch
