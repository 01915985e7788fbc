#pragma once
// The config registry (DESIGN convention 6): every tunable is declared once, with its type,
// default, optional environment variable, allowed range or choices, and a doc line.
// docs/config.md is generated from it (`cohort config docs`), and a test keeps the two equal.
//
// A Config holds values for the keys of one registry. Values come, in increasing precedence,
// from defaults, the environment variable (when the key has one), the TOML file, and --set.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cohort {

using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
enum class ConfigType { kBool, kInt, kFloat, kString, kIntList };
const char* config_type_name(ConfigType t);

struct ConfigKey {
  std::string name;  // dotted: "optim.lr"
  ConfigType type = ConfigType::kString;
  ConfigValue default_value;
  std::string doc;
  std::string env;                   // environment variable that sets it, or empty
  std::vector<std::string> choices;  // for strings; empty = any
  std::optional<double> min, max;    // for numbers (and each element of int lists)
};

class ConfigRegistry {
 public:
  // Declares a key; declaring the same name twice is an Internal error.
  ConfigRegistry& add(ConfigKey key);
  const ConfigKey* find(const std::string& name) const;
  const std::vector<ConfigKey>& keys() const { return keys_; }
  // The declared key closest to `name` (edit distance), for "did you mean" messages.
  std::string closest(const std::string& name) const;
  // Markdown reference: one table per section (the part before the first dot).
  std::string markdown() const;

 private:
  std::vector<ConfigKey> keys_;
  std::map<std::string, size_t> index_;
};

class Config {
 public:
  explicit Config(const ConfigRegistry& registry);

  // Sets `name` from a value, checking type, range and choices. `origin` names where the value
  // came from ("examples/a.toml", "--set", "env COHORT_X") for error messages.
  void set(const std::string& name, const ConfigValue& value, const std::string& origin);
  // Parses text for the key's type ("0.1", "true", "[512, 256]", "adamw") and sets it.
  void set_from_string(const std::string& name, const std::string& text, const std::string& origin);
  // Reads variables of keys that declare one from `env` (a snapshot of the environment).
  void apply_env(const std::map<std::string, std::string>& env);

  bool get_bool(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<int64_t>& get_int_list(const std::string& name) const;
  bool is_set(const std::string& name) const;  // set by something other than the default
  // The value as TOML writes it ("0.05", "[512, 256]", "\"mlp\""), whatever its type.
  std::string value_str(const std::string& name) const;
  const ConfigRegistry& registry() const { return *registry_; }
  // Every key = value, as TOML (sections by prefix); what the run directory records.
  std::string to_toml() const;

 private:
  const ConfigKey& key(const std::string& name) const;
  const ConfigRegistry* registry_;
  std::map<std::string, ConfigValue> values_;
  std::map<std::string, std::string> origins_;
};

std::string config_value_str(const ConfigValue& v);
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace cohort
