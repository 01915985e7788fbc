#pragma once
// One run directory's metrics, as `cohort train` wrote them (cohort/train: trainer_run.cc,
// trainer_loop.cc, scaling_baseline.cc):
//   metrics.jsonl            rank 0: "start", "step", "eval", "summary" records
//   metrics.rank<R>.jsonl    rank R > 0: "start", "step", "summary" (no evaluations)
//   metrics.server<i>.jsonl  parameter server i: "server_interval", "server_summary"
//   config.toml              the resolved config (parallel.strategy is read from it)
// Records are kept as JSON: the report reads the fields it knows and ignores the rest, so new
// fields (energy, strategy metrics) pass through without a change here.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::report {

struct RankRecords {
  nlohmann::json start;               // null when the rank wrote none
  std::vector<nlohmann::json> steps;  // "step" records, in file order
  nlohmann::json summary;             // the last "summary" record; null while running
  // Every record of the rank's file, in file order (evaluations and checkpoints too): what
  // `cohort dashboard` replays (monitor/replay.h).
  std::vector<nlohmann::json> records;
};

struct RunData {
  std::string dir;
  std::string name;                           // the directory's last component
  std::string strategy;                       // parallel.strategy from config.toml; "" when unknown
  std::map<std::string, std::string> config;  // config.toml flattened (config_diff.h)
  std::map<int, RankRecords> ranks;           // rank -> its records (0 always present)
  std::vector<nlohmann::json> evals;          // rank 0's "eval" records
  std::map<int, std::vector<nlohmann::json>> servers;  // server index -> its records
  std::vector<std::string> warnings;  // e.g. a truncated last line that was skipped

  const RankRecords& chief() const { return ranks.at(0); }
  // Workers: the start record's "workers", else the number of rank files.
  int workers() const;
};

// The records of one JSONL file. A line that is not a JSON object is an InvalidArgument naming
// the file and the line number, except a last line without its newline (a job still writing
// it): that one is skipped and a warning is appended to *warnings.
std::vector<nlohmann::json> read_jsonl(const std::string& path, std::vector<std::string>* warnings);

// Reads a run directory. InvalidArgument when the directory is missing or holds no
// metrics.jsonl.
RunData read_run(const std::string& dir);

}  // namespace cohort::report
