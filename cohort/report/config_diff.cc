#include "cohort/report/config_diff.h"

#include <toml++/toml.h>
#include <charconv>
#include <filesystem>
#include <set>
#include <sstream>

#include "cohort/report/run_data.h"

namespace cohort::report {
namespace {

constexpr const char* kUnset = "(unset)";

// A value as TOML writes it, floats in their shortest round-trip form ("0.05", not toml++'s
// 17 digits) so that a table of differences reads as the config was written.
std::string value_text(const toml::node& v) {
  if (const auto* d = v.as_floating_point()) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d->get());
    return std::string(buf, end);
  }
  std::ostringstream os;
  v.visit([&os](const auto& node) { os << node; });
  return os.str();
}

void flatten(const toml::table& t, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (auto&& [k, v] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table()) {
      flatten(*sub, key, out);
    } else {
      out[key] = value_text(v);
    }
  }
}

}  // namespace

std::map<std::string, std::string> read_config(const std::string& run_dir) {
  std::map<std::string, std::string> out;
  const std::filesystem::path path = std::filesystem::path(run_dir) / "config.toml";
  if (!std::filesystem::exists(path)) return out;
  try {
    flatten(toml::parse_file(path.string()), "", out);
  } catch (const toml::parse_error&) {
    out.clear();
  }
  return out;
}

ConfigDiff config_diff(const std::vector<RunData>& runs) {
  ConfigDiff d;
  std::set<std::string> keys;
  for (const RunData& r : runs) {
    d.runs.push_back(r.name);
    if (r.config.empty()) d.without_config.push_back(r.name);
    for (const auto& [k, v] : r.config) keys.insert(k);
  }
  for (const std::string& k : keys) {
    ConfigDiff::Row row{k, {}};
    for (const RunData& r : runs) {
      if (r.config.empty()) continue;  // nothing to compare for that run
      auto it = r.config.find(k);
      row.values.push_back(it == r.config.end() ? kUnset : it->second);
    }
    if (std::set<std::string>(row.values.begin(), row.values.end()).size() > 1) {
      // The values of every run, a run without a config shown as such.
      row.values.clear();
      for (const RunData& r : runs) {
        auto it = r.config.find(k);
        row.values.push_back(r.config.empty()       ? "(no config.toml)"
                             : it == r.config.end() ? kUnset
                                                    : it->second);
      }
      d.rows.push_back(std::move(row));
    }
  }
  return d;
}

nlohmann::json to_json(const ConfigDiff& diff) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ConfigDiff::Row& r : diff.rows) rows.push_back({{"key", r.key}, {"values", r.values}});
  return {{"runs", diff.runs}, {"rows", rows}, {"without_config", diff.without_config}};
}

std::string to_text(const ConfigDiff& diff) {
  std::string out;
  if (diff.runs.size() < 2) return out;
  for (const std::string& r : diff.without_config)
    out += "config: " + r + " has no readable config.toml\n";
  if (diff.rows.empty()) {
    return out + (diff.without_config.empty()
                      ? "config: the runs' configurations are the same\n"
                      : "config: the configurations that could be read are the same\n");
  }
  out += "config: " + std::to_string(diff.rows.size()) + " key(s) differ (";
  for (size_t i = 0; i < diff.runs.size(); ++i) out += (i ? " | " : "") + diff.runs[i];
  out += ")\n";
  for (const ConfigDiff::Row& r : diff.rows) {
    out += "  " + r.key + ": ";
    for (size_t i = 0; i < r.values.size(); ++i) out += (i ? " | " : "") + r.values[i];
    out += "\n";
  }
  return out;
}

}  // namespace cohort::report
