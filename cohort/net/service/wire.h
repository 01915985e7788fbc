#pragma once
// The service channel's frames (server.h, client.h), after authentication (net/auth.h,
// context kContext). Frames are cut by net/frame.h, the parser the store uses too; this
// file gives the service's magic, kinds and body. A pure function over bytes, fuzzed by
// tests/fuzz/service_frame_fuzz.cc.
//
//   frame: magic u32 "cSV1" | kind u8 | body_len u32 | body
//   body:  id u64 | payload (body_len - 8 bytes, at most the receiver's max_payload)
//
//   kind        sent by   id
//   kRequest    client    the client's request id (unique among its outstanding requests)
//   kResponse   server    the id of the request it answers; payload: the answer
//   kError      server    the id of the request it answers; payload: why it failed (text)
//   kMessage    either    0; unsolicited, no reply expected
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cohort/net/frame.h"

namespace cohort::net::service {

using Bytes = std::vector<uint8_t>;

inline constexpr std::string_view kContext = "cohort-service-v1";  // for the handshake
inline constexpr uint32_t kMagic = 0x31565363;                     // "cSV1"
inline constexpr size_t kHeaderBytes = net::frame::kHeaderBytes;
inline constexpr size_t kIdBytes = 8;
inline constexpr size_t kMaxErrorBytes = 4096;  // error texts are cut to this

enum class Kind : uint8_t { kRequest = 1, kResponse = 2, kError = 3, kMessage = 4 };
const char* kind_name(Kind k);

struct Frame {
  Kind kind = Kind::kMessage;
  uint64_t id = 0;
  std::span<const uint8_t> payload;  // points into the parsed buffer
};

using ParseStatus = net::frame::Status;
using ParseResult = net::frame::Result;

// Parses one frame from the front of buf; a body_len over max_payload + kIdBytes is malformed
// as soon as the header is in. Checks: magic, kind, length, a body that holds the id, a zero
// id on messages.
ParseResult parse_frame(std::span<const uint8_t> buf, size_t max_payload, Frame* out);
// Appends one frame. encode(parse(x)) reproduces x exactly (the fuzzer checks it).
void encode_frame(Kind kind, uint64_t id, std::span<const uint8_t> payload, Bytes* out);
// A frame's header and id (what encode_frame writes before the payload), for senders that
// write the payload straight from where it lies (writev) instead of copying it into a frame.
inline constexpr size_t kFrameHeadBytes = kHeaderBytes + kIdBytes;
void encode_head(Kind kind, uint64_t id, size_t payload_size, uint8_t (&out)[kFrameHeadBytes]);

// Frame bodies at least this large are received straight into their own buffer (the client's
// read_loop, the server's start_body) instead of being copied out of the read chunk.
inline constexpr size_t kDirectBytes = size_t{64} << 10;

}  // namespace cohort::net::service
