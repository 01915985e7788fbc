#pragma once
// A count or an elastic range of them: `--workers N|MIN:MAX` (cohort train) and
// `--nnodes N|MIN:MAX` (cohort run).
#include <string>

namespace cohort::cli {

// N or MIN:MAX, each within 1..1024 and MIN <= MAX: "" when valid (*min = 0 for N, *max = N),
// else why not (CLI11 shows it after the option's name).
std::string check_count_range(const std::string& spec, int* min, int* max);

}  // namespace cohort::cli
