#pragma once
// The one frame parser of cohort's request/response servers: the rendezvous store (wire.h) and
// the service channel (net/service/) both cut their byte streams into frames here, so both
// get the same checks, and tests/fuzz/ fuzzes them once (store_frame_fuzz, service_frame_fuzz).
//
// Every frame: a 9-byte header, then body_len bytes of body. Integers are little-endian.
//   magic u32 | kind u8 | body_len u32 | body
// Each protocol has its own magic ("cST1" store requests, "cSR1" store responses, "cSV1"
// service frames), its own range of kinds, and its own cap on body_len.
//
// Checked in the order the bytes arrive, so garbage is refused as early as possible: the magic
// on the bytes present (a wrong first byte is refused at once), then the kind byte, then
// body_len against the cap as soon as the header is in (before any of the body is read, so a
// huge length field never makes anyone wait for or allocate the body it claims).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cohort::net::frame {

inline constexpr size_t kHeaderBytes = 9;

// What one protocol accepts. The strings only go into error messages.
struct Spec {
  uint32_t magic = 0;
  uint8_t min_kind = 0;
  uint8_t max_kind = 0;
  size_t max_body = 0;
  const char* frame_name = "frame";       // "request": "bad request magic", "request body length"
  const char* kind_name = "kind";         // "command": "unknown command byte 99"
  const char* peer_name = "cohort peer";  // "cohort store peer": "(not a cohort store peer?)"
};

enum class Status { kNeedMore, kOk, kMalformed };
struct Result {
  Status status = Status::kNeedMore;
  // kOk: bytes of the frame consumed (header and body). kNeedMore: the whole frame's size once
  // the header is in (0 before), never over kHeaderBytes + max_body, so a reader can ask for
  // exactly the rest.
  size_t size = 0;
  std::string error;  // kMalformed: what was wrong, for the log
};

struct Frame {
  uint8_t kind = 0;
  std::span<const uint8_t> body;  // points into the parsed buffer
};

// Parses one frame from the front of buf. On kOk, *out is its kind and body.
Result parse(std::span<const uint8_t> buf, const Spec& spec, Frame* out);

// Appends a header with a placeholder length; finish() patches it once the body is appended.
// Returns where the frame starts in *out.
size_t begin(std::vector<uint8_t>* out, uint32_t magic, uint8_t kind);
void finish(std::vector<uint8_t>* out, size_t start);

}  // namespace cohort::net::frame
