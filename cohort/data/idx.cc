#include "cohort/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cohort/core/error.h"
#include "cohort/data/hex.h"

namespace cohort::data {
namespace {

// Rejects headers that promise more than this before allocating anything: a corrupt header
// must produce an error, not a 4 GiB allocation.
constexpr int64_t kMaxDataBytes = int64_t(1) << 36;
// Data is read in chunks so that a truncated file is detected before the buffer reaches the
// size a (possibly corrupt) header promised.
constexpr int64_t kReadChunk = int64_t(1) << 24;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// Reads up to n bytes; returns how many arrived before the end of the (decompressed) stream.
int64_t read_some(gzFile f, uint8_t* dst, int64_t n, const std::string& path, int64_t at) {
  int64_t got = 0;
  while (got < n) {
    unsigned want = unsigned(std::min<int64_t>(n - got, int64_t(1) << 30));
    int r = gzread(f, dst + got, want);
    if (r < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      if (code == Z_BUF_ERROR) break;  // the gzip stream ends early: a truncated file
      throw IoError(detail::str(path, ": read failed after ", at + got, " bytes: ", msg));
    }
    if (r == 0) break;
    got += r;
  }
  return got;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

GzHandle open_for_read(const std::string& path, IdxKind kind) {
  std::error_code ec;
  COHORT_CHECK_IO(std::filesystem::exists(path, ec), "IDX ", idx_kind_name(kind), " file ", path,
                  " does not exist");
  gzFile f = gzopen(path.c_str(), "rb");
  COHORT_CHECK_IO(f != nullptr, "cannot open IDX ", idx_kind_name(kind), " file ", path, ": ",
                  std::strerror(errno));
  gzbuffer(f, 1 << 17);
  return GzHandle(f);
}

// Reads and checks the magic and the dimensions; returns the dimensions.
std::vector<int64_t> read_header(gzFile f, const std::string& path, IdxKind kind) {
  const uint32_t want_magic = uint32_t(kind);
  const int64_t ndims = want_magic & 0xff;
  const int64_t header_bytes = 4 + 4 * ndims;
  uint8_t header[16];
  int64_t got = read_some(f, header, 4, path, 0);
  COHORT_CHECK_IO(got == 4, path, ": expected a ", header_bytes, "-byte IDX ", idx_kind_name(kind),
                  " header, file ends after ", got, " bytes");
  uint32_t magic = be32(header);
  COHORT_CHECK_ARG(magic == want_magic, path, ": magic ", hex32(magic), ", expected ",
                   hex32(want_magic), " for ", kind == IdxKind::kImages ? "an " : "a ",
                   idx_kind_name(kind), " file");
  got += read_some(f, header + 4, header_bytes - 4, path, 4);
  COHORT_CHECK_IO(got == header_bytes, path, ": expected a ", header_bytes, "-byte IDX ",
                  idx_kind_name(kind), " header, file ends after ", got, " bytes");
  std::vector<int64_t> dims(static_cast<size_t>(ndims));
  for (int64_t d = 0; d < ndims; ++d) dims[size_t(d)] = be32(header + 4 + 4 * d);
  for (int64_t d = 1; d < ndims; ++d) {
    COHORT_CHECK_ARG(dims[size_t(d)] > 0, path, ": dimension ", d, " of the ", idx_kind_name(kind),
                     " header is 0 (dims ", dims_str(dims), ")");
  }
  return dims;
}

}  // namespace

const char* idx_kind_name(IdxKind kind) {
  return kind == IdxKind::kImages ? "images" : "labels";
}

IdxArray read_idx(const std::string& path, IdxKind kind) {
  GzHandle f = open_for_read(path, kind);
  IdxArray out;
  out.dims = read_header(f.get(), path, kind);
  const int64_t header_bytes = 4 + 4 * int64_t(out.dims.size());
  int64_t total = 1;
  for (int64_t d : out.dims) {
    total *= d;
    COHORT_CHECK_ARG(total <= kMaxDataBytes, path, ": header promises ", dims_str(out.dims),
                     " elements, more than the ", kMaxDataBytes, "-byte limit");
  }
  // Grow in chunks: a truncated file fails at its real size, not at the promised one.
  int64_t got = 0;
  while (got < total) {
    int64_t want = std::min(kReadChunk, total - got);
    out.data.resize(size_t(got + want));
    int64_t r = read_some(f.get(), out.data.data() + got, want, path, header_bytes + got);
    got += r;
    if (r < want) break;
  }
  COHORT_CHECK_IO(got == total, path, ": expected ", header_bytes + total, " bytes of ",
                  idx_kind_name(kind), " data (", header_bytes, "-byte header + ",
                  dims_str(out.dims), "), file ends after ", header_bytes + got);
  uint8_t extra;
  COHORT_CHECK_ARG(read_some(f.get(), &extra, 1, path, header_bytes + total) == 0, path,
                   ": data continues past the ", header_bytes + total,
                   " bytes its header promises (", dims_str(out.dims), "); not an IDX ",
                   idx_kind_name(kind), " file?");
  return out;
}

void write_idx(const std::string& path, IdxKind kind, const std::vector<int64_t>& dims,
               const uint8_t* data, Compression compression) {
  const uint32_t magic = uint32_t(kind);
  COHORT_CHECK_ARG(int64_t(dims.size()) == int64_t(magic & 0xff), "write_idx ", path, ": ",
                   idx_kind_name(kind), " need ", magic & 0xff, " dims, got ", dims.size());
  std::vector<uint8_t> header;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) header.push_back(uint8_t(v >> s));
  };
  put(magic);
  int64_t total = 1;
  for (int64_t d : dims) {
    put(uint32_t(d));
    total *= d;
  }
  gzFile f = gzopen(path.c_str(), compression == Compression::kGzip ? "wb6" : "wbT");
  COHORT_CHECK_IO(f != nullptr, "write_idx: cannot create ", path, ": ", std::strerror(errno));
  GzHandle h(f);
  bool ok = gzwrite(f, header.data(), unsigned(header.size())) == int(header.size());
  for (int64_t at = 0; ok && at < total; at += kReadChunk) {
    unsigned n = unsigned(std::min(kReadChunk, total - at));
    ok = gzwrite(f, data + at, n) == int(n);
  }
  COHORT_CHECK_IO(ok, "write_idx: writing ", path, " failed");
  COHORT_CHECK_IO(gzclose(h.release()) == Z_OK, "write_idx: closing ", path, " failed");
}

}  // namespace cohort::data
