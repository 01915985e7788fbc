#include "cohort/train/init_weights.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "cohort/ckpt/safetensors.h"
#include "cohort/core/error.h"
#include "cohort/nn/layers.h"

namespace cohort::train {
namespace {

// "a, b ,c" -> {"a", "b", "c"}: a comma-separated config value, items trimmed, empty ones out.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t to = std::min(text.find(',', from), text.size());
    std::string item = text.substr(from, to - from);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
    from = to + 1;
  }
  return out;
}

// model.init_map: "from=to" pairs, each a prefix of the file's names and its replacement.
std::vector<std::pair<std::string, std::string>> parse_renames(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& item : split_list(text)) {
    const size_t eq = item.find('=');
    COHORT_CHECK_ARG(
        eq != std::string::npos && eq > 0 && item.find('=', eq + 1) == std::string::npos,
        "config: model.init_map entry '", item,
        "' must be FROM=TO (a prefix of the file's tensor names and what it becomes, "
        "e.g. features.0.=conv1.)");
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  // Longest prefix first: "layers.1." wins over "layers." for "layers.1.weight".
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return out;
}

std::string renamed(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& renames) {
  for (const auto& [from, to] : renames) {
    if (name.compare(0, from.size(), from) == 0) return to + name.substr(from.size());
  }
  return name;
}

// model.init_skip: exact names, or prefixes when the entry ends with '.' ("fc2.").
bool skipped(const std::string& name, const std::vector<std::string>& skips) {
  for (const std::string& s : skips) {
    if (name == s || (s.back() == '.' && name.compare(0, s.size(), s) == 0)) return true;
  }
  return false;
}

std::string some_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 6;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += detail::str(", ... (", names.size() - kShown, " more)");
  return out;
}

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16;
}

// The file's tensor as the model's dtype (a float converts to another float; nothing else).
Tensor as_model_dtype(const std::string& path, const std::string& name, const Tensor& t,
                      DType want) {
  if (t.dtype() == want) return t;
  COHORT_CHECK_ARG(is_float(t.dtype()) && is_float(want), "model.init_from '", path, "': tensor ",
                   name, " is ", dtype_name(t.dtype()), " but the model's is ", dtype_name(want),
                   " (floating-point tensors convert; this one cannot)");
  Tensor out = empty(t.shape(), want);
  out.copy_(t);
  return out;
}

// A dropout site's call counter is cohort's own state (nn/layers.h), absent from PyTorch's
// files: a model starting from them starts its counters at 0.
bool is_dropout_counter(const std::string& name) {
  const std::string suffix = std::string(".") + nn::kDropoutCounterBuffer;
  return name == nn::kDropoutCounterBuffer ||
         (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0);
}

}  // namespace

InitReport load_initial_weights(const Config& cfg, nn::Module& model) {
  InitReport report;
  report.path = cfg.get_string("model.init_from");
  if (report.path.empty()) return report;
  const auto renames = parse_renames(cfg.get_string("model.init_map"));
  const std::vector<std::string> skips = split_list(cfg.get_string("model.init_skip"));
  const nn::StateDict own = model.state_dict();

  nn::StateDict dict;
  std::vector<std::string> unexpected, missing;
  for (auto& [file_name, t] : ckpt::read_safetensors(report.path)) {
    const std::string name = renamed(file_name, renames);
    if (skipped(name, skips)) continue;
    auto it = own.find(name);
    if (it == own.end()) {
      unexpected.push_back(name == file_name ? name : detail::str(file_name, " (as ", name, ")"));
      continue;
    }
    COHORT_CHECK_ARG(!dict.count(name), "model.init_from '", report.path,
                     "': two tensors of the file become ", name, " (check model.init_map)");
    dict[name] = as_model_dtype(report.path, name, t, it->second.dtype());
  }
  for (const auto& [name, t] : own) {
    if (skipped(name, skips)) {
      ++report.kept;
    } else if (!dict.count(name) && !is_dropout_counter(name)) {
      missing.push_back(name);
    }
  }
  COHORT_CHECK_ARG(
      missing.empty() && unexpected.empty(), "model.init_from '", report.path, "': ",
      missing.empty() ? ""
                      : detail::str(missing.size(), " tensor(s) of the model are not in the file: ",
                                    some_names(missing), unexpected.empty() ? "" : "; "),
      unexpected.empty()
          ? ""
          : detail::str(unexpected.size(),
                        " tensor(s) of the file are not in the model: ", some_names(unexpected)),
      ". Rename with model.init_map (FROM=TO prefixes) or leave out with "
      "model.init_skip; the model's tensors are listed by `cohort ckpt inspect` on "
      "one of its checkpoints");
  try {
    model.load_state_dict(dict, {.strict = false});  // shapes: all-or-nothing, every mismatch named
  } catch (const Error&) {
    rethrow_with_context(std::current_exception(),
                         detail::str("model.init_from '", report.path, "': "));
  }
  report.loaded = int(dict.size());
  return report;
}

}  // namespace cohort::train
