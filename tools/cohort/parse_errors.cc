#include "tools/cohort/parse_errors.h"

#include <algorithm>
#include <cstdio>

#include "cohort/core/config.h"

namespace cohort::cli {
namespace {

std::string strip_dashes(const std::string& s) {
  return s.substr(std::min(s.find_first_not_of('-'), s.size()));
}

// The subcommand the parse got furthest into: where CLI11 left the words it did not know.
const CLI::App* deepest(const CLI::App& root) {
  const CLI::App* a = &root;
  while (!a->get_subcommands().empty()) a = a->get_subcommands().front();
  return a;
}

// "cohort", "cohort train", "cohort ckpt inspect": the command as the user typed it.
std::string command_path(const CLI::App* a) {
  std::string path;
  for (; a != nullptr; a = a->get_parent())
    path = (a->get_parent() ? a->get_name() : std::string("cohort")) + (path.empty() ? "" : " ") +
           path;
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App* a) {
  std::vector<std::string> names;
  for (const CLI::App* s : a->get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(s->get_name());
  return names;
}

std::vector<std::string> option_names(const CLI::App* a) {
  std::vector<std::string> names;
  for (const CLI::Option* o : a->get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  return names;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string guess = closest_word(word, candidates);
  return guess.empty() ? "" : " (did you mean '" + guess + "'?)";
}

// `cohort trian`, `cohort ckpt insepct`: CLI11 says only "A subcommand is required".
std::string unknown_command(const CLI::App* a, const std::vector<std::string>& left) {
  const std::vector<std::string> names = subcommand_names(a);
  const std::string path = command_path(a);
  auto word = std::find_if(left.begin(), left.end(),
                           [](const std::string& w) { return !w.empty() && w[0] != '-'; });
  if (word == left.end()) return "`" + path + "` needs a command: one of " + join(names);
  return "'" + *word + "' is not a command of `" + path + "`" + did_you_mean(*word, names) +
         "; the commands are: " + join(names);
}

// `cohort train x.toml --worker 2`: CLI11 says "arguments were not expected: 2 --worker".
std::string unknown_options(const CLI::App* a, const std::vector<std::string>& left) {
  const std::vector<std::string> names = option_names(a);
  std::string out;
  for (const std::string& w : left) {
    if (w.size() < 2 || w[0] != '-' || w == "--") continue;  // a value, or the separator
    const std::string flag = w.substr(0, w.find('='));       // --worker=2 names --worker
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    out += std::string(out.empty() ? "" : "; ") + "unknown option '" + flag + "' for `" +
           command_path(a) + "`" + did_you_mean(flag, names);
  }
  return out;
}

}  // namespace

std::string closest_word(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string want = strip_dashes(word);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(want, strip_dashes(c));
    if (d < best_d) best_d = d, best = c;
  }
  // A third of the word, at least 2 (a swap of two letters: "trian"), but never the whole word
  // ("-x" is not a typo of "-n").
  const size_t limit = std::max<size_t>(2, want.size() / 3);
  return best_d <= limit && best_d < want.size() ? best : "";
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  const CLI::App* a = deepest(app);
  std::string message;
  if (dynamic_cast<const CLI::RequiredError*>(&e) && !subcommand_names(a).empty() &&
      a->get_require_subcommand_min() > 0) {
    message = unknown_command(a, a->remaining());
  } else if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // Each command keeps the words it did not know: `cohort --verbos train` leaves one at the top.
    for (const CLI::App* at = a; at != nullptr && message.empty(); at = at->get_parent()) {
      message = unknown_options(at, at->remaining());
      if (!message.empty()) a = at;  // its --help lists the options
    }
  }
  if (message.empty()) message = e.what();  // e.g. "--workers: Value 0 not in range 1 to 1024"
  std::fprintf(stderr, "cohort: error: %s\nRun `%s --help` for the options.\n", message.c_str(),
               command_path(a).c_str());
  return kUsageError;
}

}  // namespace cohort::cli
