#pragma once
// Appends one JSON object per line to <run dir>/metrics.jsonl: step lines, evaluations, and a
// final summary. Each line is written whole and flushed, so a crash loses at most one line and
// `tail -f` shows progress.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace cohort::train {

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // IoError naming the path if it can't open
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace cohort::train
