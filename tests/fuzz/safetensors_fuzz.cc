// libFuzzer target for the safetensors reader (cohort/ckpt/safetensors.h): a checkpoint or a
// downloaded model is a file from outside, so its header must never crash or exhaust the reader.
// parse_safetensors is the same code read_safetensors runs, over bytes instead of a file.
//
// Checks, beyond "no crash, no over-read, no huge allocation" (ASan/UBSan do those):
//   - a rejected input is an IoError (never another exception type);
//   - an accepted one has unique tensor names, none "__metadata__", whose bytes tile the data
//     section exactly (what the reader promises), and reads the same a second time.
// Run: safetensors_fuzz -max_len=2048 corpus_dir tests/fuzz/corpus/safetensors
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <span>

#include "cohort/ckpt/safetensors.h"
#include "cohort/core/error.h"
#include "cohort/tensor/allocator.h"

using namespace cohort;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

uint64_t header_length(std::span<const uint8_t> bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  return n;
}

void check_accepted(std::span<const uint8_t> bytes, const ckpt::NamedTensors& tensors,
                    const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    check(name != "__metadata__" && names.insert(name).second);
    check(t.defined() && t.is_contiguous());
    total += t.nbytes();
  }
  check(total == bytes.size() - 8 - header_length(bytes));
  std::map<std::string, std::string> again_meta;
  ckpt::NamedTensors again = ckpt::parse_safetensors(bytes, "fuzz input", &again_meta);
  check(again.size() == tensors.size() && again_meta == metadata);
  for (size_t i = 0; i < again.size(); ++i) {
    const Tensor& a = tensors[i].second;
    const Tensor& b = again[i].second;
    check(again[i].first == tensors[i].first && a.shape() == b.shape() && a.dtype() == b.dtype());
    check(a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
  }
}

}  // namespace

void fuzz_one(std::span<const uint8_t> bytes) {
  std::map<std::string, std::string> metadata;
  ckpt::NamedTensors tensors;
  try {
    tensors = ckpt::parse_safetensors(bytes, "fuzz input", &metadata);
  } catch (const IoError&) {
    return;  // refused, as it should be: the message names the problem
  }
  check_accepted(bytes, tensors, metadata);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_one(std::span<const uint8_t>(data, size));
  // The CPU allocator keeps freed blocks for reuse; handing them back after each input lets
  // ASan see a use after free and LeakSanitizer see only real leaks.
  CpuAllocator::instance().empty_cache();
  return 0;
}
