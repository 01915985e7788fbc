#pragma once
// File helpers shared by every test folder: a self-deleting temporary directory and
// whole-file reads/writes in binary mode (the bytes exactly as they are on disk).
//
// Contract:
// - TempDir makes a fresh, uniquely named directory under the system temp dir
//   (std::filesystem::temp_directory_path(), so TMPDIR is honoured) and removes it with all
//   its contents in the destructor. It throws std::system_error if the directory cannot be
//   made, so a test never goes on writing into "/".
// - try_read_bytes returns nullopt when the file cannot be opened (e.g. a worker has not
//   written it yet); read_bytes returns "" then, which suits files that may vanish while read
//   (/proc/<pid>/...).
// - write_bytes replaces the file's contents and throws std::runtime_error if it cannot.
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cohort::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cohort_test_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;  // a destructor must not throw; a leftover dir is harmless
    std::filesystem::remove_all(path_, ec);
  }
  // Copies would remove the same directory twice.
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` may contain slashes ("a/b.txt"); parent directories are not created.
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::optional<std::string> try_read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline std::string read_bytes(const std::filesystem::path& path) {
  return try_read_bytes(path).value_or("");
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("write_bytes: cannot write " + path.string());
}

}  // namespace cohort::testing
