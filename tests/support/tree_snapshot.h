#pragma once
// Every regular file under a directory, with its bytes and modification time: what a test
// takes before and after an operation to prove that the operation changed none of them.
#include <filesystem>
#include <map>
#include <string>

#include "tests/support/files.h"

namespace cohort::testing {

struct FileState {
  std::string bytes;
  std::filesystem::file_time_type mtime;
};

// Relative path -> state, for every regular file under `root` (empty when it does not exist).
using TreeSnapshot = std::map<std::string, FileState>;

inline TreeSnapshot snapshot_tree(const std::filesystem::path& root) {
  TreeSnapshot out;
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    out[std::filesystem::relative(e.path(), root).string()] = {read_bytes(e.path()),
                                                               e.last_write_time()};
  }
  return out;
}

// Each file of `before` that is missing, or whose bytes or mtime differ, in `after`, one line
// each; "" when none. Files only in `after` are not changes of `before`'s.
inline std::string changed_files(const TreeSnapshot& before, const TreeSnapshot& after) {
  std::string out;
  for (const auto& [path, was] : before) {
    auto it = after.find(path);
    if (it == after.end())
      out += "removed: " + path + "\n";
    else if (it->second.bytes != was.bytes)
      out += "bytes changed: " + path + "\n";
    else if (it->second.mtime != was.mtime)
      out += "mtime changed: " + path + "\n";
  }
  return out;
}

}  // namespace cohort::testing
