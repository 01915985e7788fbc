#pragma once
// The TCP transport's frame header, as a pure function over bytes, so the checks made on
// receipt can be tested and fuzzed (tests/fuzz/tcp_frame_fuzz.cc) without a socket.
//
// Every message on a TcpPair is a 48-byte frame header, then `length` payload bytes. Integers
// are in host order (little-endian; cohort does not mix byte orders in one job):
//   magic u32 (kFrameMagic) | flags u32 | length u64 | Header 32 bytes (tag u64, info u64[3])
// flags is 0 for a data frame, or kFlagAbort for an abort frame, whose payload is the sender's
// error message (at most kMaxAbortBytes) and after which nothing follows. Any other flag bit,
// a wrong magic or a length over the limit makes the header malformed: the stream position is
// then unknown and the pair must be dropped.
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "cohort/comm/transport/transport.h"

namespace cohort::comm::transport::tcp {

inline constexpr uint32_t kFrameMagic = 0xc0de7c01u;
inline constexpr size_t kFrameHeaderBytes = 48;
inline constexpr uint32_t kFlagAbort = 1;
inline constexpr uint64_t kMaxAbortBytes = 1024;

enum class FrameKind : uint8_t { kData, kAbort };

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  uint64_t length = 0;  // payload bytes that follow the header
  Header header;        // compared with the posted recv's (zero in abort frames)
  bool operator==(const FrameHeader&) const = default;
};

// What a receiver accepts. A data frame's length is compared with the posted recv afterwards
// (a difference is a Mismatch, not a malformed frame), so by default any length passes here.
struct FrameLimits {
  uint64_t max_data_bytes = std::numeric_limits<uint64_t>::max();
  uint64_t max_abort_bytes = kMaxAbortBytes;
};

struct FrameDecode {
  FrameHeader frame;  // valid when ok()
  std::string error;  // what was wrong: "bad frame magic 0x... (expected 0x...)"
  bool ok() const { return error.empty(); }
};

void encode_frame_header(const FrameHeader& frame, std::span<uint8_t, kFrameHeaderBytes> out);

// Reads the first kFrameHeaderBytes of `bytes` (fewer is malformed) and checks magic, flags
// and length, in that order. Never throws; accepted headers re-encode to the same bytes.
FrameDecode decode_frame_header(std::span<const uint8_t> bytes, const FrameLimits& limits = {});

}  // namespace cohort::comm::transport::tcp
