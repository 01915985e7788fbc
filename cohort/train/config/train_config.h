#pragma once
// The keys of `cohort train` and the TOML loader. Every key is documented in docs/config.md,
// which `cohort config docs` regenerates from train_registry().
#include <map>
#include <string>
#include <vector>

#include "cohort/core/config.h"

namespace cohort::train {

// The registry of every key `cohort train` understands (built once).
const ConfigRegistry& train_registry();

// Adds the comm/ddp/ckpt/fault keys (train/config/registry_dist.cc).
void add_distributed_keys(ConfigRegistry& r);
// Adds the fault-injection (fault.*), straggler (metrics.straggler_*) and flight recorder keys
// (train/config/registry_health.cc).
void add_health_keys(ConfigRegistry& r);
// Adds the energy and metrics keys (train/config/registry_metrics.cc).
void add_metrics_keys(ConfigRegistry& r);

// Adds the federated-learning keys, fl.* (train/config/registry_fl.cc).
void add_federated_keys(ConfigRegistry& r);

// docs/config.md: a header plus the registry's tables (`cohort config docs` prints it).
std::string config_reference_markdown();

// Loads `path` (TOML) over the defaults, then the environment snapshot, then `overrides`
// ("key=value", as given to --set). Invalid TOML, unknown keys (with a "did you mean"),
// wrong types and out-of-range values are InvalidArgument naming the file, line and key.
Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const std::map<std::string, std::string>& env = {});

// Applies "key=value" strings to cfg.
void apply_overrides(Config& cfg, const std::vector<std::string>& overrides);

// A snapshot of the real environment, for load_config's env argument.
std::map<std::string, std::string> environment_snapshot();

}  // namespace cohort::train
