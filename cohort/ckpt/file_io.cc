#include "cohort/ckpt/file_io.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "cohort/tensor/strided.h"

namespace cohort::ckpt::internal {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

int open_or_throw(const std::string& path, int flags, const char* what) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  COHORT_CHECK_IO(fd >= 0, "cannot open ", path, " for ", what, ": ", errno_text());
  return fd;
}

}  // namespace

File File::create(const std::string& path) {
  return File(open_or_throw(path, O_WRONLY | O_CREAT | O_TRUNC, "writing"), path);
}

File File::open_read(const std::string& path) {
  return File(open_or_throw(path, O_RDONLY, "reading"), path);
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

void File::write_all(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    COHORT_CHECK_IO(w > 0, "write to ", path_, " failed: ", w < 0 ? errno_text() : "wrote 0 bytes");
    p += w;
    n -= size_t(w);
  }
}

void File::pread_all(void* data, size_t n, uint64_t offset, const char* what) const {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    COHORT_CHECK_IO(r >= 0, "read of ", what, " from ", path_, " failed: ", errno_text());
    COHORT_CHECK_IO(r > 0, path_, ": file ends at byte ", offset, " while reading ", what, " (", n,
                    " more bytes expected)");
    p += r;
    n -= size_t(r);
    offset += uint64_t(r);
  }
}

uint64_t File::size() const {
  struct stat st {};
  COHORT_CHECK_IO(::fstat(fd_, &st) == 0, "stat of ", path_, " failed: ", errno_text());
  return uint64_t(st.st_size);
}

void File::close() {
  int fd = fd_;
  fd_ = -1;
  COHORT_CHECK_IO(::close(fd) == 0, "close of ", path_, " failed: ", errno_text());
}

std::string read_text_file(const std::string& path) {
  File f = File::open_read(path);
  std::string s(f.size(), '\0');
  f.pread_all(s.data(), s.size(), 0, "the file");
  return s;
}

void write_text_file(const std::string& path, const std::string& text) {
  File f = File::create(path);
  f.write_all(text.data(), text.size());
  f.close();
}

void fsync_path(const std::string& path) {
  // O_RDONLY works for both files and directories; fsync on it flushes the inode's data.
  File f = File(open_or_throw(path, O_RDONLY, "fsync"), path);
  COHORT_CHECK_IO(::fsync(f.fd()) == 0, "fsync of ", path, " failed: ", errno_text());
}

std::string sha256_file(const std::string& path, uint64_t* size) {
  File f = File::open_read(path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  COHORT_CHECK_IO(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1,
                  "SHA-256 init failed for ", path);
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    ssize_t r = ::read(f.fd(), buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    COHORT_CHECK_IO(r >= 0, "read of ", path, " failed: ", errno_text());
    if (r == 0) break;
    COHORT_CHECK_IO(EVP_DigestUpdate(ctx.get(), buf.data(), size_t(r)) == 1,
                    "SHA-256 update failed for ", path);
    total += uint64_t(r);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  COHORT_CHECK_IO(EVP_DigestFinal_ex(ctx.get(), md, &len) == 1, "SHA-256 final failed for ", path);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  if (size) *size = total;
  return hex;
}

Tensor contiguous_copy(const Tensor& t) {
  COHORT_CHECK_ARG(t.defined(), "contiguous_copy: undefined tensor");
  if (!t.device().is_cpu()) return t.to(Device::cpu());  // a GPU's tensor, copied to the host
  Tensor out = empty(t.shape(), t.dtype());
  if (t.numel() == 0) return out;
  if (t.is_contiguous()) {
    std::memcpy(out.raw_data(), t.raw_data(), t.nbytes());
    return out;
  }
  // Byte gather rather than copy_(): copy_ converts through float/double for strided sources.
  const size_t item = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for_each_offset<1>(t.shape(), {&t.strides()}, [&](int64_t off) {
    std::memcpy(dst, src + off * int64_t(item), item);
    dst += item;
  });
  return out;
}

}  // namespace cohort::ckpt::internal
