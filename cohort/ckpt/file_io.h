#pragma once
// Small POSIX file helpers for ckpt/: every failure is an IoError naming the path and errno's
// text. Internal to the ckpt layer (not part of its API).
#include <cstdint>
#include <string>

#include "cohort/tensor/tensor.h"

namespace cohort::ckpt::internal {

// An open file descriptor, closed on destruction.
class File {
 public:
  // Opens for writing (created or truncated, 0644).
  static File create(const std::string& path);
  static File open_read(const std::string& path);
  File(File&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  void write_all(const void* data, size_t n);
  // Reads exactly n bytes at `offset`; `what` names the part being read in the error.
  void pread_all(void* data, size_t n, uint64_t offset, const char* what) const;
  uint64_t size() const;
  // Reports an error from close() (e.g. a deferred write error), unlike the destructor.
  void close();
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  friend void fsync_path(const std::string& path);
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

std::string read_text_file(const std::string& path);
void write_text_file(const std::string& path, const std::string& text);
// fsync a file, or a directory (so a rename or a new entry in it survives a power cut).
void fsync_path(const std::string& path);
// Lower-case hex SHA-256 of the file's bytes; *size gets its length.
std::string sha256_file(const std::string& path, uint64_t* size);
// A contiguous CPU copy of `t` with the same bytes (no float round trip: i64 and NaN payloads are
// preserved exactly), whatever t's strides; a GPU's tensor (contiguous) is copied to the host.
Tensor contiguous_copy(const Tensor& t);

}  // namespace cohort::ckpt::internal
