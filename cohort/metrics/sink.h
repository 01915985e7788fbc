#pragma once
// Records and sinks: the one path every metric takes. A record is a JSON object with an
// "event" ("start", "step", "eval", "summary", ...); the trainer and the strategies hand each
// one to a Recorder, which passes it to every sink it holds: the run's JSONL file always, the
// launcher's live stream when the job runs under `cohort train --dashboard`, and so on.
//
// Threads: a Recorder and its sinks are used by one thread at a time (the training loop).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cohort::metrics {

using Record = nlohmann::json;

class Sink {
 public:
  virtual ~Sink() = default;
  // Takes one record. A sink that cannot deliver (a closed stream) drops it and says so once;
  // only the JSONL file throws, since losing it loses the run's record.
  virtual void write(const Record& record) = 0;
};

// Appends one JSON object per line to a file: each line is written whole and flushed, so a
// crash loses at most one line and `tail -f` shows progress.
class JsonlFile final : public Sink {
 public:
  explicit JsonlFile(const std::string& path);  // IoError naming the path if it can't open
  ~JsonlFile() override;
  JsonlFile(const JsonlFile&) = delete;
  JsonlFile& operator=(const JsonlFile&) = delete;
  void write(const Record& record) override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Fans each record out to its sinks, in the order they were added.
class Recorder {
 public:
  void add(std::unique_ptr<Sink> sink) { sinks_.push_back(std::move(sink)); }
  void write(const Record& record);

 private:
  std::vector<std::unique_ptr<Sink>> sinks_;
};

}  // namespace cohort::metrics
