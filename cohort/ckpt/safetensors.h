#pragma once
// safetensors: the Hugging Face tensor file format, so that cohort checkpoints open directly in
// Python (`safetensors.numpy.load_file`, `safetensors.torch.load_file`) and vice versa.
//
// Layout (all integers little-endian):
//   [0, 8)          u64 N: length of the JSON header in bytes
//   [8, 8 + N)      UTF-8 JSON object, padded at the end with spaces so that N % 8 == 0 (the data
//                   then starts 8-byte aligned):
//                     {"__metadata__":{"k":"v",...},                       (optional)
//                      "<name>":{"dtype":"F32","shape":[2,3],"data_offsets":[begin,end]},...}
//   [8 + N, EOF)    the data: each tensor's bytes, row-major, at [begin, end) relative to 8 + N.
// dtype strings: F32 F64 F16 BF16 I32 I64 U8. A 0-d tensor has "shape":[]; an empty tensor has
// begin == end. The writer emits __metadata__ first and then the tensors in the order given,
// packed without gaps, so the same input always gives the same bytes.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::ckpt {

using cohort::NamedTensors;  // tensor/tensor.h: the one definition

// Writes `tensors` (CPU, any strides; non-contiguous ones are written contiguous, bit-exact) and
// the optional string metadata to `path`, replacing it. Throws InvalidArgument for an empty,
// duplicate or "__metadata__" name or an undefined tensor, IoError naming `path` when the file
// cannot be written. Does not fsync: CheckpointManager does that as part of its protocol.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The bytes write_safetensors would write (`name` stands for the path in errors): for sending
// tensors over the network in the checkpoint format (parse_safetensors reads them back).
std::vector<uint8_t> encode_safetensors(const NamedTensors& tensors, const std::string& name,
                                        const std::map<std::string, std::string>& metadata = {});

// Reads `path` and validates everything before trusting it: the header length fits in the file,
// the JSON is well formed, every entry has a known dtype, a shape of non-negative integers and
// data_offsets that lie inside the data, do not overlap, leave no hole and hold exactly
// numel * itemsize bytes. Any violation is an IoError naming the file and the tensor and what was
// expected. Returns the tensors (contiguous, CPU) in file offset order; fills *metadata when
// given (cleared first; left empty when the file has none).
NamedTensors read_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

// The same reader over a whole file already in memory (a download, a fuzzer's input): the same
// checks and errors as read_safetensors, with `name` standing for the path in them. The result
// does not refer to `bytes`.
NamedTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& name,
                               std::map<std::string, std::string>* metadata = nullptr);

// "F32" for DType::f32, ... (the safetensors spelling).
const char* safetensors_dtype(DType dtype);

}  // namespace cohort::ckpt
