#include "cohort/data/npz.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/data/hex.h"

namespace cohort::data {

namespace {
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  COHORT_CHECK_IO(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  FdCloser closer{fd};  // the mapping keeps the file alive without its descriptor
  struct stat st {};
  COHORT_CHECK_IO(::fstat(fd, &st) == 0, "cannot stat ", path, ": ", std::strerror(errno));
  COHORT_CHECK_IO(S_ISREG(st.st_mode), path, " is not a regular file");
  size_ = size_t(st.st_size);
  if (size_ == 0) return;  // mmap refuses length 0; an empty file has no bytes to view
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  COHORT_CHECK_IO(p != MAP_FAILED, "cannot map ", path, " (", size_,
                  " bytes): ", std::strerror(errno));
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

bool MappedFile::drop_resident_pages() const {
  // mmap returned a page-aligned start; the kernel rounds the length up to whole pages.
  return data_ == nullptr || ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED) == 0;
}

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEocdSize = 22, kZip64LocatorSize = 20, kZip64EocdSize = 56;
constexpr uint64_t kCentralSize = 46, kLocalSize = 30;
constexpr uint32_t kMax32 = 0xffffffff;
constexpr uint16_t kZip64ExtraId = 0x0001;
// zlib counts in uInt (32 bits); larger members are fed and drained in pieces of this size.
constexpr uint64_t kZlibChunk = uint64_t(1) << 30;
// A deflated member at least this large gets a warning when it is inflated: unlike a stored one,
// it is in memory whole while the data set lives, which a user streaming a large data set (and
// capping memory) should hear before it grows the process by that much.
constexpr uint64_t kInflateWarnBytes = uint64_t(256) << 20;

// Little-endian reads at offsets that come from the file itself, so each record is bounds-checked
// (need) before its fields are read.
struct ZipBytes {
  std::span<const uint8_t> b;
  const std::string& path;

  void need(uint64_t at, uint64_t n, const std::string& what) const {
    COHORT_CHECK_IO(at <= b.size() && n <= b.size() - at, path, ": ", what, " (", n,
                    " bytes at offset ", at, ") runs past the end of the ", b.size(),
                    "-byte file; truncated?");
  }
  uint64_t le(uint64_t at, int n) const {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[at + uint64_t(i)];
    return v;
  }
  uint16_t u16(uint64_t at) const { return uint16_t(le(at, 2)); }
  uint32_t u32(uint64_t at) const { return uint32_t(le(at, 4)); }
  uint64_t u64(uint64_t at) const { return le(at, 8); }
};

// Where the central directory is and how many entries it holds.
struct Directory {
  uint64_t entries = 0, size = 0, offset = 0;
};

// The end-of-central-directory record sits in the last 22 + 65535 bytes (it may be followed by
// a comment of up to 65535 bytes); the last signature whose comment fits the file is it.
uint64_t find_eocd(const ZipBytes& z) {
  const uint64_t n = z.b.size();
  if (n >= kEocdSize) {
    const uint64_t lowest = n - kEocdSize > 65535 ? n - kEocdSize - 65535 : 0;
    for (uint64_t at = n - kEocdSize + 1; at-- > lowest;) {
      if (z.u32(at) == kEocdSig && at + kEocdSize + z.u16(at + 20) <= n) return at;
    }
  }
  // A zip's first record is a local header and its directory comes last: a file that starts
  // like a zip but has no end record was cut short (an interrupted download or copy).
  COHORT_CHECK_IO(n < 4 || z.u32(0) != kLocalSig, z.path, ": a zip archive without its end ",
                  "record (", n, " bytes); truncated?");
  throw InvalidArgument(detail::str(z.path,
                                    ": not a zip archive (no end-of-central-directory "
                                    "record); a .npz from np.savez is one"));
}

Directory read_directory_location(const ZipBytes& z, uint64_t eocd) {
  uint64_t disk = z.u16(eocd + 4), cd_disk = z.u16(eocd + 6), disk_entries = z.u16(eocd + 8);
  Directory d{z.u16(eocd + 10), z.u32(eocd + 12), z.u32(eocd + 16)};
  // Zip64 (np.savez of large arrays, or many members): a locator just before the classic
  // record points at the zip64 record, whose 64-bit fields replace the saturated 16/32-bit ones.
  if (eocd >= kZip64LocatorSize && z.u32(eocd - kZip64LocatorSize) == kZip64LocatorSig) {
    const uint64_t at = z.u64(eocd - kZip64LocatorSize + 8);
    z.need(at, kZip64EocdSize, "zip64 end-of-central-directory record");
    COHORT_CHECK_ARG(z.u32(at) == kZip64EocdSig, z.path, ": the zip64 locator points at offset ",
                     at, ", which holds ", hex32(z.u32(at)),
                     ", not a zip64 end-of-central-directory record");
    disk = z.u32(at + 16);
    cd_disk = z.u32(at + 20);
    disk_entries = z.u64(at + 24);
    d = {z.u64(at + 32), z.u64(at + 40), z.u64(at + 48)};
  }
  COHORT_CHECK_ARG(disk == 0 && cd_disk == 0 && disk_entries == d.entries, z.path,
                   ": a multi-disk (split) zip archive; only single-file archives are read");
  return d;
}

// The zip64 extra field holds, in this order, only the fields whose 32-bit value saturated.
void apply_zip64_extra(const ZipBytes& z, uint64_t at, uint64_t len, uint32_t disk, ZipMember& m) {
  const uint64_t end = at + len;
  while (at + 4 <= end) {
    const uint16_t id = z.u16(at), size = z.u16(at + 2);
    uint64_t p = at + 4;
    at = p + size;
    if (id != kZip64ExtraId) continue;
    COHORT_CHECK_ARG(at <= end, z.path, ":", m.name, ": zip64 extra field overruns its entry");
    auto take = [&](uint64_t& field, int bytes) {
      COHORT_CHECK_ARG(p + uint64_t(bytes) <= at, z.path, ":", m.name,
                       ": zip64 extra field is too short for the sizes it must hold");
      field = z.le(p, bytes);
      p += uint64_t(bytes);
    };
    if (m.size == kMax32) take(m.size, 8);
    if (m.compressed_size == kMax32) take(m.compressed_size, 8);
    if (m.local_header_offset == kMax32) take(m.local_header_offset, 8);
    uint64_t d = disk;
    if (disk == 0xffff) take(d, 4);
    disk = uint32_t(d);
  }
  COHORT_CHECK_ARG(disk == 0, z.path, ":", m.name,
                   ": lies on another disk of a split archive; only single-file archives are read");
}

// One central directory entry at `at`; returns the offset of the next.
uint64_t read_entry(const ZipBytes& z, uint64_t at, uint64_t index, ZipMember& m) {
  z.need(at, kCentralSize, detail::str("central directory entry ", index));
  COHORT_CHECK_ARG(z.u32(at) == kCentralSig, z.path, ": central directory entry ", index,
                   " at offset ", at, " starts with ", hex32(z.u32(at)), ", expected ",
                   hex32(kCentralSig), "; the archive is corrupt");
  m.flags = z.u16(at + 8);
  m.method = z.u16(at + 10);
  m.crc32 = z.u32(at + 16);
  m.compressed_size = z.u32(at + 20);
  m.size = z.u32(at + 24);
  const uint64_t name_len = z.u16(at + 28), extra_len = z.u16(at + 30);
  const uint64_t comment_len = z.u16(at + 32);
  const uint32_t disk = z.u16(at + 34);
  m.local_header_offset = z.u32(at + 42);
  z.need(at + kCentralSize, name_len + extra_len + comment_len,
         detail::str("central directory entry ", index));
  m.name.assign(reinterpret_cast<const char*>(z.b.data() + at + kCentralSize), name_len);
  apply_zip64_extra(z, at + kCentralSize + name_len, extra_len, disk, m);
  return at + kCentralSize + name_len + extra_len + comment_len;
}

}  // namespace

std::vector<ZipMember> zip_members(const MappedFile& zip) {
  const ZipBytes z{zip.bytes(), zip.path()};
  const Directory d = read_directory_location(z, find_eocd(z));
  z.need(d.offset, d.size, "central directory");
  std::vector<ZipMember> members;
  // Each entry takes at least 46 bytes: a corrupt count cannot make this reserve huge.
  members.reserve(size_t(std::min(d.entries, d.size / kCentralSize)));
  uint64_t at = d.offset;
  for (uint64_t i = 0; i < d.entries; ++i) {
    ZipMember m;
    at = read_entry(z, at, i, m);
    COHORT_CHECK_ARG(at <= d.offset + d.size, zip.path(), ": central directory entry ", i,
                     " runs past the ", d.size, "-byte directory the end record declares");
    members.push_back(std::move(m));
  }
  return members;
}

namespace {

struct InflateEnd {
  z_stream* s;
  ~InflateEnd() { inflateEnd(s); }
};

uint32_t crc32_of(std::span<const uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t at = 0; at < bytes.size(); at += kZlibChunk) {
    crc = crc32(crc, bytes.data() + at, uInt(std::min<uint64_t>(kZlibChunk, bytes.size() - at)));
  }
  return uint32_t(crc);
}

// Raw deflate (zip carries no zlib header: windowBits -15) into a buffer of the directory's
// size plus one byte, so that a stream longer than declared shows itself by filling that byte.
std::shared_ptr<std::vector<uint8_t>> inflate_member(std::span<const uint8_t> in,
                                                     const ZipMember& m, const std::string& where) {
  // Deflate expands at most about 1032:1; a larger declared size is corruption, refused before
  // it becomes an allocation.
  COHORT_CHECK_ARG(m.size / 1032 <= m.compressed_size + 1, where, ": declares ", m.size,
                   " bytes inflated from ", m.compressed_size, ", more than deflate can encode");
  if (m.size >= kInflateWarnBytes)
    log::warn("data", where, ": a compressed member (np.savez_compressed) of ", m.size >> 20,
              " MiB is inflated into memory whole; np.savez (stored) or .npy files are read ",
              "through a memory map instead, for data larger than memory (docs/data.md)");
  std::shared_ptr<std::vector<uint8_t>> out;
  try {
    out = std::make_shared<std::vector<uint8_t>>(size_t(m.size + 1));
  } catch (const std::bad_alloc&) {
    throw IoError(detail::str(where, ": out of memory allocating ", m.size, " bytes to inflate ",
                              "this compressed member (np.savez_compressed); save the data with ",
                              "np.savez (stored) or as .npy files, which are read in place"));
  }
  z_stream s{};
  COHORT_CHECK_IO(inflateInit2(&s, -15) == Z_OK, where, ": zlib inflateInit2 failed");
  InflateEnd end{&s};
  uint64_t fed = 0, drained = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (s.avail_in == 0 && fed < in.size()) {
      s.next_in = const_cast<Bytef*>(in.data() + fed);
      s.avail_in = uInt(std::min<uint64_t>(kZlibChunk, in.size() - fed));
      fed += s.avail_in;
    }
    if (s.avail_out == 0 && drained < out->size()) {
      s.next_out = out->data() + drained;
      s.avail_out = uInt(std::min<uint64_t>(kZlibChunk, out->size() - drained));
      drained += s.avail_out;
    }
    rc = inflate(&s, Z_NO_FLUSH);
  }
  COHORT_CHECK_ARG(rc != Z_DATA_ERROR, where, ": corrupt deflate data: ", s.msg ? s.msg : "");
  COHORT_CHECK_IO(rc != Z_MEM_ERROR, where, ": out of memory inflating ", m.size, " bytes");
  COHORT_CHECK_ARG(s.total_out <= m.size, where, ": inflates to more than the ", m.size,
                   " bytes the zip directory declares");
  COHORT_CHECK_IO(rc == Z_STREAM_END, where, ": the deflate stream ends early (after ", s.total_out,
                  " of ", m.size, " bytes); truncated?");
  COHORT_CHECK_ARG(s.total_out == m.size, where, ": inflates to ", s.total_out, " bytes, the zip ",
                   "directory declares ", m.size);
  out->resize(size_t(m.size));  // drops the guard byte; never reallocates
  const uint32_t crc = crc32_of(*out);
  COHORT_CHECK_ARG(crc == m.crc32, where, ": CRC-32 ", hex32(crc), " of the inflated data, the ",
                   "zip directory declares ", hex32(m.crc32), "; the archive is corrupt");
  return out;
}

const char* method_name(uint16_t method) {
  switch (method) {
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstandard";
    default:
      return "unknown";
  }
}

}  // namespace

OwnedBytes zip_member_data(const std::shared_ptr<const MappedFile>& zip, const ZipMember& m) {
  const ZipBytes z{zip->bytes(), zip->path()};
  const std::string where = zip->path() + ":" + m.name;
  COHORT_CHECK_ARG((m.flags & 1) == 0, where, ": is encrypted; only plain archives are read");
  // The local header repeats the name and carries its own extra field; only their lengths are
  // used, to find the data (its sizes may be placeholders, written before the data was).
  const uint64_t at = m.local_header_offset;
  z.need(at, kLocalSize, "local header of " + m.name);
  COHORT_CHECK_ARG(z.u32(at) == kLocalSig, where, ": local header at offset ", at, " starts with ",
                   hex32(z.u32(at)), ", expected ", hex32(kLocalSig), "; the archive is corrupt");
  const uint64_t name_len = z.u16(at + 26), extra_len = z.u16(at + 28);
  z.need(at + kLocalSize, name_len + extra_len, "local header of " + m.name);
  const std::string_view local_name(reinterpret_cast<const char*>(z.b.data() + at + kLocalSize),
                                    name_len);
  COHORT_CHECK_ARG(local_name == m.name, where, ": local header names '", local_name,
                   "'; the archive is corrupt");
  const uint64_t data_at = at + kLocalSize + name_len + extra_len;
  z.need(data_at, m.compressed_size, "data of " + m.name);
  const std::span<const uint8_t> raw = z.b.subspan(data_at, m.compressed_size);
  if (m.method == 0) {
    // No CRC check here: it would read the whole member now, which mapping it is meant to avoid.
    COHORT_CHECK_ARG(m.compressed_size == m.size, where, ": stored member of ", m.compressed_size,
                     " bytes declares an uncompressed size of ", m.size);
    return {raw, zip};
  }
  COHORT_CHECK_ARG(m.method == 8, where, ": compression method ", m.method, " (",
                   method_name(m.method), ") is not supported; expected stored (np.savez) or ",
                   "deflated (np.savez_compressed)");
  auto buffer = inflate_member(raw, m, where);
  return {std::span<const uint8_t>(buffer->data(), buffer->size()), std::move(buffer)};
}

}  // namespace cohort::data
