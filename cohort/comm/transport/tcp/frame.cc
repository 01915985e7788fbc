#include "cohort/comm/transport/tcp/frame.h"

#include <cstring>
#include <ios>

namespace cohort::comm::transport::tcp {

static_assert(sizeof(Header) == 32, "the wire format carries a 32-byte Header");

void encode_frame_header(const FrameHeader& frame, std::span<uint8_t, kFrameHeaderBytes> out) {
  uint32_t magic = kFrameMagic;
  uint32_t flags = frame.kind == FrameKind::kAbort ? kFlagAbort : 0;
  std::memcpy(out.data(), &magic, 4);
  std::memcpy(out.data() + 4, &flags, 4);
  std::memcpy(out.data() + 8, &frame.length, 8);
  std::memcpy(out.data() + 16, &frame.header, 32);
}

FrameDecode decode_frame_header(std::span<const uint8_t> bytes, const FrameLimits& limits) {
  FrameDecode d;
  if (bytes.size() < kFrameHeaderBytes) {
    d.error =
        detail::str("truncated frame header: ", bytes.size(), " of ", kFrameHeaderBytes, " bytes");
    return d;
  }
  uint32_t magic, flags;
  std::memcpy(&magic, bytes.data(), 4);
  std::memcpy(&flags, bytes.data() + 4, 4);
  std::memcpy(&d.frame.length, bytes.data() + 8, 8);
  std::memcpy(&d.frame.header, bytes.data() + 16, 32);
  if (magic != kFrameMagic) {
    d.error = detail::str("bad frame magic 0x", std::hex, magic, " (expected 0x", kFrameMagic, ")");
    return d;
  }
  if ((flags & ~kFlagAbort) != 0) {
    d.error =
        detail::str("bad frame flags 0x", std::hex, flags, " (known: 0x", kFlagAbort, " abort)");
    return d;
  }
  d.frame.kind = flags & kFlagAbort ? FrameKind::kAbort : FrameKind::kData;
  bool abort = d.frame.kind == FrameKind::kAbort;
  uint64_t max = abort ? limits.max_abort_bytes : limits.max_data_bytes;
  if (d.frame.length > max) {
    d.error = detail::str(abort ? "abort" : "data", " frame length ", d.frame.length,
                          " exceeds the limit of ", max, " bytes");
  }
  return d;
}

}  // namespace cohort::comm::transport::tcp
