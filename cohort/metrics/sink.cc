#include "cohort/metrics/sink.h"

#include <cerrno>
#include <cstring>

#include "cohort/core/error.h"

namespace cohort::metrics {

JsonlFile::JsonlFile(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "a");
  COHORT_CHECK_IO(file_ != nullptr, "cannot open metrics file '", path,
                  "' for appending: ", std::strerror(errno));
}

JsonlFile::~JsonlFile() {
  if (file_) std::fclose(file_);
}

void JsonlFile::write(const Record& record) {
  std::string line = record.dump() + "\n";
  size_t n = std::fwrite(line.data(), 1, line.size(), file_);
  COHORT_CHECK_IO(n == line.size() && std::fflush(file_) == 0, "cannot write metrics file '", path_,
                  "': ", std::strerror(errno));
}

void Recorder::write(const Record& record) {
  for (auto& sink : sinks_) sink->write(record);
}

}  // namespace cohort::metrics
