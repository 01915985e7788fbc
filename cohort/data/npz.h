#pragma once
// The container side of NumPy's .npz files: a read-only file mapping and a zip reader.
//
// A .npz is a zip archive of NAME.npy members. np.savez stores them (method 0): their bytes sit
// in the file as they are, so the reader hands out a view into a read-only mmap of the whole
// archive and a data set larger than memory streams from the page cache. np.savez_compressed
// deflates them (method 8): those are inflated with zlib into memory, whole, when read.
//
// Only what the directory says is trusted: member sizes come from the central directory (with
// its zip64 extra field), never from the local headers, which np.savez may write before it knows
// the sizes. Zip64 end-of-central-directory records are followed; multi-disk archives and
// encrypted members are refused. Every error names the archive, and the member where one is
// involved ("data.npz:x.npy").
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cohort::data {

// A whole file mapped read-only (an empty file maps to no bytes); munmapped in the destructor.
// Shared through shared_ptr by everything that views its bytes.
class MappedFile {
 public:
  // Throws IoError naming `path` when it is missing, not a regular file, or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // Takes every page of the mapping out of this process's resident set (madvise MADV_DONTNEED).
  // The mapping is private and read-only, so no page was ever copied or written: they stay in
  // the page cache, and reading one again faults it back in, with the same bytes. Safe while
  // other threads read the mapping (their reads fault the pages back). mapped_reads.h says when.
  // Returns false (errno set) when the kernel refused; nothing changed then.
  bool drop_resident_pages() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Bytes that stay valid while `owner` lives: a view into a MappedFile, or an inflated buffer.
struct OwnedBytes {
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
};

// One entry of a zip archive's central directory.
struct ZipMember {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;  // 0 stored, 8 deflated; others are refused by zip_member_data
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;  // uncompressed
  uint64_t local_header_offset = 0;
};

// The members of the zip archive `zip` maps, in directory order. Throws InvalidArgument when it
// is not a zip archive (no end-of-central-directory record) or spans several disks, IoError when
// a record points past the end of the file (a truncated download).
std::vector<ZipMember> zip_members(const MappedFile& zip);

// The uncompressed bytes of `member`: a view into `zip` for a stored member, a buffer of its own
// for a deflated one (inflated here and checked against the directory's size and CRC-32).
OwnedBytes zip_member_data(const std::shared_ptr<const MappedFile>& zip, const ZipMember& member);

}  // namespace cohort::data
