#pragma once
// Command-line errors as a user should see them: the same `cohort: error: ...` line as every
// other cohort error, exit status 2 (docs/training.md, "Errors"; CLI11's own codes, 105 for a
// value out of range and so on, are not documented anywhere), and a "did you mean" for a
// mistyped subcommand or option, as config keys already have.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace cohort::cli {

// The usage-error exit status of every cohort command.
constexpr int kUsageError = 2;

// The candidate closest to `word` by edit distance (cohort::edit_distance, the config keys'
// measure), or "" when none is close enough to be a likely typo. Leading dashes are ignored, so
// "--worker" finds "--workers".
std::string closest_word(const std::string& word, const std::vector<std::string>& candidates);

// Prints `e` (raised by app.parse) to stderr and returns the exit status: 0 after --help or
// --version (printed to stdout), kUsageError otherwise.
int report_parse_error(const CLI::App& app, const CLI::ParseError& e);

}  // namespace cohort::cli
