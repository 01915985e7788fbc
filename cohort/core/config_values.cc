// Config: typed values with validation against the registry.
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "cohort/core/config.h"
#include "cohort/core/error.h"

namespace cohort {
namespace {

std::string unknown_key_message(const ConfigRegistry& r, const std::string& name,
                                const std::string& origin) {
  std::string msg = origin + ": unknown config key '" + name + "'";
  std::string guess = r.closest(name);
  if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
  return msg + "; see docs/config.md for every key";
}

// Coerces v to the key's type where that is lossless (int -> float); else throws.
ConfigValue coerce(const ConfigKey& k, const ConfigValue& v, const std::string& origin) {
  auto fail = [&](const char* got) {
    throw InvalidArgument(detail::str(origin, ": key '", k.name, "' expects a ",
                                      config_type_name(k.type), ", got a ", got));
  };
  const char* got = std::visit(
      [](const auto& x) -> const char* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return "bool";
        else if constexpr (std::is_same_v<T, int64_t>)
          return "int";
        else if constexpr (std::is_same_v<T, double>)
          return "float";
        else if constexpr (std::is_same_v<T, std::string>)
          return "string";
        else
          return "int list";
      },
      v);
  switch (k.type) {
    case ConfigType::kBool:
      if (!std::holds_alternative<bool>(v)) fail(got);
      return v;
    case ConfigType::kInt:
      if (!std::holds_alternative<int64_t>(v)) fail(got);
      return v;
    case ConfigType::kFloat:
      if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
      if (!std::holds_alternative<double>(v)) fail(got);
      return v;
    case ConfigType::kString:
      if (!std::holds_alternative<std::string>(v)) fail(got);
      return v;
    case ConfigType::kIntList:
      if (auto* i = std::get_if<int64_t>(&v)) return std::vector<int64_t>{*i};
      if (!std::holds_alternative<std::vector<int64_t>>(v)) fail(got);
      return v;
  }
  return v;
}

void check_range(const ConfigKey& k, double x, const std::string& origin) {
  if ((k.min && x < *k.min) || (k.max && x > *k.max) || std::isnan(x))
    throw InvalidArgument(detail::str(origin, ": key '", k.name, "' = ", x, " is out of range [",
                                      k.min ? detail::str(*k.min) : "-inf", ", ",
                                      k.max ? detail::str(*k.max) : "inf", "]"));
}

void validate(const ConfigKey& k, const ConfigValue& v, const std::string& origin) {
  if (auto* s = std::get_if<std::string>(&v); s && !k.choices.empty()) {
    bool ok = false;
    std::string all;
    for (const auto& c : k.choices) ok = ok || c == *s, all += (all.empty() ? "" : ", ") + c;
    if (!ok)
      throw InvalidArgument(
          detail::str(origin, ": key '", k.name, "' = \"", *s, "\" is not one of: ", all));
  }
  if (auto* i = std::get_if<int64_t>(&v)) check_range(k, double(*i), origin);
  if (auto* d = std::get_if<double>(&v)) check_range(k, *d, origin);
  if (auto* l = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t x : *l) check_range(k, double(x), origin);
}

ConfigValue parse_text(const ConfigKey& k, const std::string& text, const std::string& origin) {
  auto bad = [&] {
    return InvalidArgument(detail::str(origin, ": key '", k.name, "' expects a ",
                                       config_type_name(k.type), ", got '", text, "'"));
  };
  char* end = nullptr;
  switch (k.type) {
    case ConfigType::kBool:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      throw bad();
    case ConfigType::kInt: {
      long long x = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end) throw bad();
      return int64_t(x);
    }
    case ConfigType::kFloat: {
      double x = std::strtod(text.c_str(), &end);
      if (text.empty() || *end) throw bad();
      return x;
    }
    case ConfigType::kString:
      return text;
    case ConfigType::kIntList: {
      std::string t = text;
      for (char& c : t)
        if (c == '[' || c == ']' || c == ',') c = ' ';
      std::istringstream is(t);
      std::vector<int64_t> out;
      std::string tok;
      while (is >> tok) {
        long long x = std::strtoll(tok.c_str(), &end, 10);
        if (*end) throw bad();
        out.push_back(x);
      }
      return out;
    }
  }
  throw bad();
}

}  // namespace

Config::Config(const ConfigRegistry& registry) : registry_(&registry) {
  for (const auto& k : registry.keys()) values_[k.name] = k.default_value;
}

const ConfigKey& Config::key(const std::string& name) const {
  const ConfigKey* k = registry_->find(name);
  if (!k) throw InvalidArgument(unknown_key_message(*registry_, name, "config"));
  return *k;
}

void Config::set(const std::string& name, const ConfigValue& value, const std::string& origin) {
  const ConfigKey* k = registry_->find(name);
  if (!k) throw InvalidArgument(unknown_key_message(*registry_, name, origin));
  ConfigValue v = coerce(*k, value, origin);
  validate(*k, v, origin);
  values_[name] = std::move(v);
  origins_[name] = origin;
}

void Config::set_from_string(const std::string& name, const std::string& text,
                             const std::string& origin) {
  const ConfigKey* k = registry_->find(name);
  if (!k) throw InvalidArgument(unknown_key_message(*registry_, name, origin));
  set(name, parse_text(*k, text, origin), origin);
}

void Config::apply_env(const std::map<std::string, std::string>& env) {
  for (const auto& k : registry_->keys()) {
    if (k.env.empty()) continue;
    auto it = env.find(k.env);
    if (it != env.end()) set_from_string(k.name, it->second, "environment variable " + k.env);
  }
}

bool Config::get_bool(const std::string& n) const {
  key(n);
  return std::get<bool>(values_.at(n));
}
int64_t Config::get_int(const std::string& n) const {
  key(n);
  return std::get<int64_t>(values_.at(n));
}
double Config::get_float(const std::string& n) const {
  key(n);
  return std::get<double>(values_.at(n));
}
const std::string& Config::get_string(const std::string& n) const {
  key(n);
  return std::get<std::string>(values_.at(n));
}
const std::vector<int64_t>& Config::get_int_list(const std::string& n) const {
  key(n);
  return std::get<std::vector<int64_t>>(values_.at(n));
}
bool Config::is_set(const std::string& n) const {
  return origins_.count(n) > 0;
}

std::string Config::value_str(const std::string& name) const {
  key(name);  // InvalidArgument naming an unknown key
  return config_value_str(values_.at(name));
}

std::string Config::to_toml() const {
  // One table per section, in the order sections first appear in the registry (a section's
  // keys may be declared in several places; TOML forbids repeating a table).
  std::vector<std::string> order;
  std::map<std::string, std::ostringstream> tables;
  for (const auto& k : registry_->keys()) {
    size_t dot = k.name.find('.');
    std::string s = k.name.substr(0, dot);
    if (!tables.count(s)) order.push_back(s);
    tables[s] << k.name.substr(dot + 1) << " = " << config_value_str(values_.at(k.name)) << "\n";
  }
  std::string out;
  for (const std::string& s : order)
    out += (out.empty() ? "" : "\n") + ("[" + s + "]\n") + tables[s].str();
  return out;
}

}  // namespace cohort
