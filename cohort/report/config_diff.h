#pragma once
// What differs between runs' configurations, for `cohort report A B ...`: each run directory
// records its resolved config (config.toml, every key with its value), so two runs that were
// meant to differ in one knob can be checked to differ in that knob only.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::report {

struct RunData;

// A run's config.toml flattened to "section.key" -> the value as TOML writes it ("0.05",
// "\"ddp\"", "[512, 256]"). Empty when the file is absent or does not parse (the report still
// shows the metrics; the config table then says so).
std::map<std::string, std::string> read_config(const std::string& run_dir);

struct ConfigDiff {
  std::vector<std::string> runs;  // run names, in the order given
  struct Row {
    std::string key;
    std::vector<std::string> values;  // one per run; "(unset)" where a run lacks the key
  };
  std::vector<Row> rows;                    // the keys whose values are not all equal, sorted
  std::vector<std::string> without_config;  // runs whose config.toml was absent or unreadable
};

ConfigDiff config_diff(const std::vector<RunData>& runs);
nlohmann::json to_json(const ConfigDiff& diff);
// "optim.lr: 0.05 | 0.1" per differing key, or a line saying the configs are the same.
std::string to_text(const ConfigDiff& diff);

}  // namespace cohort::report
