#include "tools/cohort/count_range.h"

namespace cohort::cli {

std::string check_count_range(const std::string& spec, int* min, int* max) {
  auto count = [](const std::string& text, int* out) -> std::string {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (text.empty() || used != text.size())
      return "expected N or MIN:MAX (e.g. 4, or 2:4), got '" + text + "'";
    if (v < 1 || v > 1024) return "Value " + text + " not in range 1 to 1024";
    *out = int(v);
    return "";
  };
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) {
    *min = 0;
    return count(spec, max);
  }
  std::string why = count(spec.substr(0, colon), min);
  if (why.empty()) why = count(spec.substr(colon + 1), max);
  if (why.empty() && *min > *max) why = "MIN:MAX needs MIN <= MAX, got " + spec;
  return why;
}

}  // namespace cohort::cli
