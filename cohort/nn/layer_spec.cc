#include "cohort/nn/layer_spec.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "cohort/core/error.h"

namespace cohort::nn {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Each layer's text: lines and `;` both separate, comments are dropped, blanks skipped.
std::vector<std::string> layer_texts(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line = line.substr(0, line.find('#'));
    std::istringstream parts(line);
    for (std::string part; std::getline(parts, part, ';');)
      if (!trimmed(part).empty()) out.push_back(trimmed(part));
  }
  return out;
}

LayerSpec parse_one(const std::string& text, int index, const std::string& origin) {
  LayerSpec spec;
  spec.index = index;
  spec.text = text;
  std::istringstream words(text);
  words >> spec.type;
  std::transform(spec.type.begin(), spec.type.end(), spec.type.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  for (std::string w; words >> w;) {
    size_t eq = w.find('=');
    if (eq == std::string::npos) {
      COHORT_CHECK_ARG(spec.options.empty(), origin, ": ", describe(spec), ": the value `", w,
                       "` comes after key=value options; give it as key=value too");
      spec.positional.push_back(w);
      continue;
    }
    std::string key = w.substr(0, eq), value = w.substr(eq + 1);
    COHORT_CHECK_ARG(!key.empty() && !value.empty(), origin, ": ", describe(spec), ": `", w,
                     "` must be key=value with neither side empty (no spaces around `=`)");
    COHORT_CHECK_ARG(spec.options.emplace(key, value).second, origin, ": ", describe(spec),
                     ": option `", key, "` is given twice");
  }
  return spec;
}

}  // namespace

std::string describe(const LayerSpec& spec) {
  return detail::str("layer ", spec.index, " (`", spec.text, "`)");
}

std::vector<LayerSpec> parse_layer_list(const std::string& text, const std::string& origin) {
  std::vector<LayerSpec> top;
  std::vector<std::vector<LayerSpec>*> open{&top};  // the innermost list being filled is last
  std::vector<LayerSpec*> blocks;                   // the residual blocks still open
  int index = 0;
  for (const std::string& t : layer_texts(text)) {
    LayerSpec spec = parse_one(t, ++index, origin);
    if (spec.type == "end") {
      COHORT_CHECK_ARG(spec.positional.empty() && spec.options.empty(), origin, ": ",
                       describe(spec), ": `end` takes no values");
      COHORT_CHECK_ARG(!blocks.empty(), origin, ": ", describe(spec),
                       ": `end` without a `residual` before it");
      blocks.pop_back();
      open.pop_back();
      continue;
    }
    open.back()->push_back(std::move(spec));
    if (open.back()->back().type == "residual") {
      blocks.push_back(&open.back()->back());
      open.push_back(&blocks.back()->body);
    }
  }
  COHORT_CHECK_ARG(blocks.empty(), origin, ": ", blocks.empty() ? "" : describe(*blocks.back()),
                   ": a residual block needs an `end` after its layers");
  COHORT_CHECK_ARG(!top.empty(), origin, ": the layer list is empty (e.g. \"flatten; linear 128; ",
                   "relu; linear\")");
  return top;
}

}  // namespace cohort::nn
