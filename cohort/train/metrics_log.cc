#include "cohort/train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "cohort/core/error.h"

namespace cohort::train {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "a");
  COHORT_CHECK_IO(file_ != nullptr, "cannot open metrics file '", path,
                  "' for appending: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace cohort::train
