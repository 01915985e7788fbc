#include "cohort/core/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "cohort/core/error.h"

namespace cohort {

const char* config_type_name(ConfigType t) {
  switch (t) {
    case ConfigType::kBool:
      return "bool";
    case ConfigType::kInt:
      return "int";
    case ConfigType::kFloat:
      return "float";
    case ConfigType::kString:
      return "string";
    case ConfigType::kIntList:
      return "int list";
  }
  return "?";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// A TOML basic string: quotes, backslashes and control characters escaped, so that a value
// with a line break (a multi-line model.layers) reads back from the run's config.toml.
std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string config_value_str(const ConfigValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          os << (x ? "true" : "false");
        else if constexpr (std::is_same_v<T, std::string>)
          os << toml_quoted(x);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
          os << "]";
        } else if constexpr (std::is_same_v<T, double>) {
          char buf[64];  // shortest text that reads back to the same double
          auto r = std::to_chars(buf, buf + sizeof buf, x);
          os << std::string_view(buf, size_t(r.ptr - buf));
          if (os.str().find_first_of(".eE") == std::string::npos && std::isfinite(x)) os << ".0";
        } else
          os << x;
      },
      v);
  return os.str();
}

ConfigRegistry& ConfigRegistry::add(ConfigKey key) {
  COHORT_INTERNAL(!index_.count(key.name), "config key declared twice: ", key.name);
  index_[key.name] = keys_.size();
  keys_.push_back(std::move(key));
  return *this;
}

const ConfigKey* ConfigRegistry::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &keys_[it->second];
}

std::string ConfigRegistry::closest(const std::string& name) const {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& k : keys_) {
    // Compare both the full name and the last component, so "optim.learning_rat" and "lr_x"
    // both find their key.
    std::string leaf = k.name.substr(k.name.rfind('.') + 1);
    std::string want_leaf = name.substr(name.rfind('.') + 1);
    size_t d = std::min(edit_distance(name, k.name), edit_distance(want_leaf, leaf) + 1);
    if (d < best_d) best_d = d, best = k.name;
  }
  return best_d <= std::max<size_t>(3, name.size() / 3) ? best : "";
}

std::string ConfigRegistry::markdown() const {
  std::ostringstream os;
  std::string section;
  for (const auto& k : keys_) {
    std::string s = k.name.substr(0, k.name.find('.'));
    if (s != section) {
      section = s;
      os << "\n## [" << section << "]\n\n| key | type | default | description |\n"
         << "|---|---|---|---|\n";
    }
    os << "| `" << k.name << "` | " << config_type_name(k.type) << " | `"
       << config_value_str(k.default_value) << "` | " << k.doc;
    if (!k.choices.empty()) {
      os << " One of:";
      for (size_t i = 0; i < k.choices.size(); ++i)
        os << (i ? ", " : " ") << "`" << k.choices[i] << "`";
      os << ".";
    }
    if (k.min || k.max) {
      os << " Range: " << (k.min ? detail::str(*k.min) : "-inf") << " .. "
         << (k.max ? detail::str(*k.max) : "inf") << ".";
    }
    if (!k.env.empty()) os << " Env: `" << k.env << "`.";
    os << " |\n";
  }
  return os.str();
}

}  // namespace cohort
