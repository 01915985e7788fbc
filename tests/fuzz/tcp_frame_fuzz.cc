// libFuzzer target for the TCP transport's frame header decoder
// (cohort/comm/transport/tcp/frame.h), which reads the first bytes of every message a peer
// sends on a data connection.
//
// Checks, beyond "no crash, no over-read" (ASan/UBSan do those):
//   - a rejected header always says why;
//   - every accepted header respects the limits and re-encodes to exactly the bytes it came
//     from (so no two byte strings decode to the same header).
// Run: tcp_frame_fuzz -max_len=128 corpus_dir tests/fuzz/corpus/tcp_frame
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "cohort/comm/transport/tcp/frame.h"

using namespace cohort::comm::transport::tcp;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzz_header(std::span<const uint8_t> bytes, const FrameLimits& limits) {
  FrameDecode d = decode_frame_header(bytes, limits);
  if (!d.ok()) return;
  check(bytes.size() >= kFrameHeaderBytes);
  uint64_t max = d.frame.kind == FrameKind::kAbort ? limits.max_abort_bytes : limits.max_data_bytes;
  check(d.frame.length <= max);
  uint8_t again[kFrameHeaderBytes];
  encode_frame_header(d.frame, again);
  check(std::memcmp(again, bytes.data(), kFrameHeaderBytes) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  fuzz_header(bytes, FrameLimits{});  // as TcpPair receives
  FrameLimits tight;
  tight.max_data_bytes = 4096;
  tight.max_abort_bytes = 16;
  fuzz_header(bytes, tight);
  return 0;
}
