#pragma once
// Reader and writer for the IDX format of MNIST and Fashion-MNIST (LeCun et al.).
//
// Layout: a 4-byte big-endian magic 0x0000TTNN (TT = element type, 0x08 for unsigned bytes;
// NN = number of dimensions), NN big-endian uint32 dimensions, then the row-major data.
// Files may be gzipped (.gz, as distributed) or plain: zlib reads both transparently.
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::data {

// The two kinds of IDX file a classification dataset is made of, by their magic number.
enum class IdxKind : uint32_t {
  kLabels = 0x00000801,  // uint8, 1 dimension: [N]
  kImages = 0x00000803,  // uint8, 3 dimensions: [N, rows, cols]
};
const char* idx_kind_name(IdxKind kind);  // "labels", "images"

struct IdxArray {
  std::vector<int64_t> dims;  // [N] or [N, rows, cols]
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads a whole file. Throws IoError when the file is missing, unreadable or ends before the
// bytes its header promises; InvalidArgument when the magic is not `kind`'s, a dimension is 0,
// or data follows the promised bytes. Every message names the file.
IdxArray read_idx(const std::string& path, IdxKind kind);

enum class Compression { kNone, kGzip };
// Writes `dims` and product(dims) bytes from `data` (tests, tools). Throws IoError on failure.
void write_idx(const std::string& path, IdxKind kind, const std::vector<int64_t>& dims,
               const uint8_t* data, Compression compression);

}  // namespace cohort::data
