#pragma once
// Run directories of the e2e tests: a fresh one per test (removed when the test binary exits)
// the newest checkpoint a run wrote, and the last record of an event in a metrics file.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cohort::testing {

// Removes the run directories this process made when the test binary exits.
struct RemoveAtExit {
  std::vector<std::filesystem::path> dirs;
  ~RemoveAtExit() {
    std::error_code ec;
    for (const std::filesystem::path& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

// An empty directory "<tmp>/<prefix><name>_<pid>" (the pid keeps two concurrent runs of a
// suite apart), removed at exit.
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  static RemoveAtExit made;
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  made.dirs.push_back(d);
  return d;
}

// The newest complete checkpoint directory of a run.
inline std::filesystem::path newest_checkpoint(const std::filesystem::path& run) {
  std::filesystem::path best;
  for (auto& e : std::filesystem::directory_iterator(run / "checkpoints")) {
    std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && (best.empty() || n > best.filename().string())) best = e.path();
  }
  return best;
}

// The last record with "event" = `event` in a JSONL metrics file (null if none).
inline nlohmann::json last_record(const std::filesystem::path& jsonl, const std::string& event) {
  std::ifstream in(jsonl);
  std::string line;
  nlohmann::json last;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == event) last = j;
  }
  return last;
}

// Every record with "event" = `event` in a JSONL metrics file, in file order.
inline std::vector<nlohmann::json> records_of(const std::filesystem::path& jsonl,
                                              const std::string& event) {
  std::ifstream in(jsonl);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == event) out.push_back(std::move(j));
  }
  return out;
}

// Step -> loss of a metrics file's "step" records; a resumed run appends, so the last record of
// a step wins.
inline std::map<int64_t, double> step_losses(const std::filesystem::path& jsonl) {
  std::map<int64_t, double> out;
  for (const nlohmann::json& j : records_of(jsonl, "step"))
    out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  return out;
}

}  // namespace cohort::testing
