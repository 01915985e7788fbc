#include "cohort/train/config/train_config.h"

#include <toml++/toml.h>
#include <unistd.h>  // environ (declared with _GNU_SOURCE, which g++ defines)
#include <filesystem>

#include "cohort/core/error.h"

namespace cohort::train {
namespace {

std::string where(const std::string& path, const toml::source_region& src) {
  return detail::str(path, ":", src.begin.line, ":", src.begin.column);
}

std::string layer_lines(const toml::array& a, const std::string& origin, const std::string& key);

// One table of a layer list (`[[model.layers]] type = "conv2d" out = 32`) as the list's text
// (nn/layer_spec.h): "conv2d out=32"; a residual's `layers` become its body and an `end`.
std::string layer_line(const toml::table& t, const std::string& origin, const std::string& key) {
  auto type = t["type"].value<std::string>();
  COHORT_CHECK_ARG(type.has_value(), origin, ": each table of '", key,
                   "' needs type = \"...\" (a layer type, e.g. \"linear\")");
  std::string line = *type, body;
  for (const auto& [k, v] : t) {
    if (k.str() == "type") continue;
    if (const toml::array* inner = v.as_array(); inner && k.str() == "layers") {
      body = layer_lines(*inner, origin, key);
      continue;
    }
    std::string text;
    if (auto s = v.value_exact<std::string>())
      text = *s;
    else if (auto b = v.value_exact<bool>())
      text = *b ? "true" : "false";
    else if (auto i = v.value_exact<int64_t>())
      text = std::to_string(*i);
    else if (auto d = v.value_exact<double>())
      text = config_value_str(*d);
    else
      throw InvalidArgument(detail::str(origin, ": '", key, "': option '", k.str(),
                                        "' must be a number, a boolean or a string"));
    line += " " + std::string(k.str()) + "=" + text;
  }
  return body.empty() ? line : line + "; " + body + "; end";
}

// A list of strings (one layer each) or of tables, joined into one text with `;`.
std::string layer_lines(const toml::array& a, const std::string& origin, const std::string& key) {
  std::string out;
  for (const toml::node& e : a) {
    std::string one;
    if (auto s = e.value_exact<std::string>())
      one = *s;
    else if (const toml::table* t = e.as_table())
      one = layer_line(*t, origin, key);
    else
      throw InvalidArgument(detail::str(origin, ": '", key, "' must be a list of strings or ",
                                        "of tables, one per layer"));
    out += (out.empty() ? "" : "; ") + one;
  }
  return out;
}

ConfigValue toml_value(const toml::node& n, const std::string& origin, const std::string& key) {
  if (auto v = n.value_exact<bool>()) return *v;
  if (auto v = n.value_exact<int64_t>()) return *v;
  if (auto v = n.value_exact<double>()) return *v;
  if (auto v = n.value_exact<std::string>()) return *v;
  const toml::array* list = n.as_array();
  if (list && !list->empty() && !list->front().is_integer())
    return layer_lines(*list, origin, key);  // a string key given as a list (model.layers)
  if (const toml::array* a = list) {
    std::vector<int64_t> out;
    for (const toml::node& e : *a) {
      auto i = e.value_exact<int64_t>();
      COHORT_CHECK_ARG(i.has_value(), origin, ": key '", key, "' must be a list of integers");
      out.push_back(*i);
    }
    return out;
  }
  throw InvalidArgument(detail::str(origin, ": key '", key, "' has an unsupported value type"));
}

void apply_table(Config& cfg, const toml::table& t, const std::string& prefix,
                 const std::string& path) {
  for (const auto& [k, node] : t) {
    std::string name = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    std::string origin = where(path, node.source());
    if (const toml::table* sub = node.as_table()) {
      apply_table(cfg, *sub, name, path);
      continue;
    }
    cfg.set(name, toml_value(node, origin, name), origin);
  }
}

// The cosine schedule warms up over optim.warmup_steps of the run's steps, so warmup cannot
// exceed them. train.max_steps caps the run, so a warmup above it is wrong whatever the data:
// caught here, before `cohort train` launches any worker. (A run bounded by train.epochs alone
// is checked in make_schedule, once the data says how many steps an epoch has.) Refused rather
// than clamped: a silently shortened warmup changes the training the user asked for.
void check_schedule(const Config& cfg) {
  if (cfg.get_string("optim.schedule") != "cosine") return;
  int64_t warmup = cfg.get_int("optim.warmup_steps"), max_steps = cfg.get_int("train.max_steps");
  COHORT_CHECK_ARG(max_steps <= 0 || warmup <= max_steps, "config: optim.warmup_steps (", warmup,
                   ") must be <= train.max_steps (", max_steps,
                   "), the run's total steps, for optim.schedule = \"cosine\": lower "
                   "optim.warmup_steps to at most ",
                   max_steps, " (--set optim.warmup_steps=N) or raise train.max_steps");
}

}  // namespace

void apply_overrides(Config& cfg, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    size_t eq = o.find('=');
    COHORT_CHECK_ARG(eq != std::string::npos && eq > 0, "--set '", o,
                     "': expected key=value, e.g. --set optim.lr=0.1");
    cfg.set_from_string(o.substr(0, eq), o.substr(eq + 1), "--set " + o);
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const std::map<std::string, std::string>& env) {
  Config cfg(train_registry());
  cfg.apply_env(env);
  if (!path.empty()) {
    COHORT_CHECK_ARG(std::filesystem::exists(path), "config file '", path, "' does not exist");
    toml::table table;
    try {
      table = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      throw InvalidArgument(
          detail::str(where(path, e.source()), ": invalid TOML: ", e.description()));
    }
    apply_table(cfg, table, "", path);
  }
  apply_overrides(cfg, overrides);
  check_schedule(cfg);
  if (cfg.get_string("run.name").empty() && !path.empty())
    cfg.set("run.name", std::filesystem::path(path).stem().string(), "config file name");
  return cfg;
}

std::map<std::string, std::string> environment_snapshot() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    size_t eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return env;
}

}  // namespace cohort::train
