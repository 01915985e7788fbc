#include "cohort/core/process_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace cohort {
namespace {

// "VmRSS:\t   87340 kB" -> 87340 * 1024; 0 when `key` is not at the start of a line.
uint64_t process_status_kib(std::string_view status, std::string_view key) {
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(key)) continue;
    line.remove_prefix(key.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    uint64_t kib = 0;
    std::from_chars(line.data(), line.data() + line.size(), kib);
    return kib * 1024;  // the kernel prints kB meaning KiB
  }
  return 0;
}

}  // namespace

ProcessMemory parse_process_status(std::string_view status) {
  return {process_status_kib(status, "VmRSS:"), process_status_kib(status, "VmHWM:")};
}

ProcessMemory process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_process_status(text.str());
}

}  // namespace cohort
