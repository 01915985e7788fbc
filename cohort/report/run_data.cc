#include "cohort/report/run_data.h"

#include <toml++/toml.h>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "cohort/core/error.h"
#include "cohort/report/config_diff.h"

namespace cohort::report {
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  COHORT_CHECK_IO(in.good(), "cannot read metrics file '", path, "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parses one line; a parse error or a non-object becomes a message, returned in *error.
nlohmann::json parse_line(const std::string& line, std::string* error) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    *error = "not valid JSON";
  else if (!j.is_object())
    *error = "not a JSON object";
  return j;
}

// parallel.strategy from the run's config.toml; "" when the file or the key is absent.
std::string read_strategy(const fs::path& dir) {
  fs::path cfg = dir / "config.toml";
  if (!fs::exists(cfg)) return "";
  try {
    toml::table t = toml::parse_file(cfg.string());
    return t["parallel"]["strategy"].value_or(std::string());
  } catch (const toml::parse_error&) {
    return "";  // the strategy is a label only; a broken config does not stop the report
  }
}

void add_record(RankRecords& r, nlohmann::json j) {
  r.records.push_back(j);
  std::string event = j.value("event", "");
  if (event == "start")
    r.start = std::move(j);
  else if (event == "step")
    r.steps.push_back(std::move(j));
  else if (event == "summary")
    r.summary = std::move(j);
}

}  // namespace

std::vector<nlohmann::json> read_jsonl(const std::string& path,
                                       std::vector<std::string>* warnings) {
  std::string text = read_file(path);
  std::vector<nlohmann::json> out;
  size_t pos = 0;
  for (int64_t line_no = 1; pos < text.size(); ++line_no) {
    size_t end = text.find('\n', pos);
    bool complete = end != std::string::npos;
    std::string line = text.substr(pos, complete ? end - pos : std::string::npos);
    pos = complete ? end + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string error;
    nlohmann::json j = parse_line(line, &error);
    if (error.empty()) {
      out.push_back(std::move(j));
    } else if (!complete) {  // the writer appends whole lines: this one is still being written
      warnings->push_back(detail::str(path, ":", line_no,
                                      ": skipped a truncated last line (the job may still be "
                                      "writing it)"));
    } else {
      throw InvalidArgument(detail::str(path, ":", line_no, ": ", error, ": '", line.substr(0, 80),
                                        line.size() > 80 ? "...'" : "'"));
    }
  }
  return out;
}

int RunData::workers() const {
  const nlohmann::json& s = chief().start;
  if (s.is_object() && s.contains("workers")) return s["workers"].get<int>();
  return int(ranks.size());
}

RunData read_run(const std::string& dir) {
  COHORT_CHECK_ARG(fs::is_directory(dir), "run directory '", dir, "' does not exist");
  fs::path main = fs::path(dir) / "metrics.jsonl";
  COHORT_CHECK_ARG(fs::exists(main), "run directory '", dir,
                   "' has no metrics.jsonl (is it a `cohort train` run directory?)");
  RunData run;
  run.dir = dir;
  run.name = fs::path(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::path(dir).lexically_normal().parent_path().filename();
  run.strategy = read_strategy(dir);
  run.config = read_config(dir);
  for (nlohmann::json& j : read_jsonl(main.string(), &run.warnings)) {
    if (j.value("event", "") == "eval") {
      run.ranks[0].records.push_back(j);
      run.evals.push_back(std::move(j));
    } else {
      add_record(run.ranks[0], std::move(j));
    }
  }
  run.ranks[0];  // rank 0 is there even when the file held no step yet
  static const std::regex kRank(R"(metrics\.rank(\d+)\.jsonl)"),
      kServer(R"(metrics\.server(\d+)\.jsonl)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    std::smatch m;
    if (std::regex_match(f, m, kRank)) {
      RankRecords& r = run.ranks[std::stoi(m[1])];
      for (nlohmann::json& j : read_jsonl(e.path().string(), &run.warnings))
        add_record(r, std::move(j));
    } else if (std::regex_match(f, m, kServer)) {
      run.servers[std::stoi(m[1])] = read_jsonl(e.path().string(), &run.warnings);
    }
  }
  return run;
}

}  // namespace cohort::report
