// Declarations of the energy.* and metrics.* keys of `cohort train`: part of the registry
// behind docs/config.md. The meter is cohort/metrics/energy.h; docs/monitoring.md, "Energy".
#include "cohort/train/config/train_config.h"

namespace cohort::train {

using T = ConfigType;

// Defaults of the CPU power model: a typical two-socket server core. An Intel Xeon Gold 6248
// has a TDP of 150 W for 20 cores, 7.5 W per core under load; a package idles near a third
// of its TDP (C-states with the uncore still on), 2.5 W per core. Estimates, not measurements:
// set them for your CPU (its TDP / cores, and its idle package power / cores).
void add_metrics_keys(ConfigRegistry& r) {
  r.add({"energy.source",
         T::kString,
         std::string("auto"),
         "Where energy figures come from: RAPL package counters if readable, else the CPU "
         "power model (`auto`); only RAPL (`rapl`: an error when unreadable); only the model "
         "(`model`, an estimate); none (`off`).",
         "",
         {"auto", "rapl", "model", "off"}});
  r.add({"energy.active_watts_per_core",
         T::kFloat,
         7.5,
         "CPU power model: watts of a core busy with this rank's threads (default: a Xeon Gold "
         "6248's 150 W TDP / 20 cores).",
         "",
         {},
         0.0});
  r.add({"energy.idle_watts_per_core",
         T::kFloat,
         2.5,
         "CPU power model: watts of one of this rank's cores (run.threads) while it waits "
         "(default: a third of the active figure).",
         "",
         {},
         0.0});
  r.add({"energy.rapl_root", T::kString, std::string("/sys/class/powercap"),
         "Directory holding the RAPL domains (intel-rapl:<N>); tests point it at a fake tree."});
  r.add({"metrics.target_accuracy",
         T::kFloat,
         0.0,
         "Accuracy (0..1) whose first evaluation reaching it records the job's energy so far "
         "(summary: energy_to_target_j). 0: none.",
         "",
         {},
         0.0,
         1.0});
}

}  // namespace cohort::train
