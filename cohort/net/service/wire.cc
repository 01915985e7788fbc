#include "cohort/net/service/wire.h"

#include <algorithm>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::net::service {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRequest:
      return "request";
    case Kind::kResponse:
      return "response";
    case Kind::kError:
      return "error";
    case Kind::kMessage:
      return "message";
  }
  return "unknown";
}

ParseResult parse_frame(std::span<const uint8_t> buf, size_t max_payload, Frame* out) {
  const net::frame::Spec spec{kMagic,
                                     uint8_t(Kind::kRequest),
                                     uint8_t(Kind::kMessage),
                                     max_payload + kIdBytes,
                                     "service frame",
                                     "frame kind",
                                     "cohort service peer"};
  net::frame::Frame f;
  ParseResult res = net::frame::parse(buf, spec, &f);
  if (res.status != ParseStatus::kOk) return res;
  const Kind kind = Kind(f.kind);
  if (f.body.size() < kIdBytes)
    return ParseResult{ParseStatus::kMalformed, 0,
                       detail::str(kind_name(kind), " body of ", f.body.size(),
                                   " bytes is shorter than its ", kIdBytes, "-byte id")};
  const uint64_t id = bytes::load<uint64_t>(f.body.data());
  if (kind == Kind::kMessage && id != 0)
    return ParseResult{ParseStatus::kMalformed, 0,
                       detail::str("message with id ", id, " (messages carry id 0)")};
  out->kind = kind;
  out->id = id;
  out->payload = f.body.subspan(kIdBytes);
  return res;
}

void encode_head(Kind kind, uint64_t id, size_t payload_size, uint8_t (&out)[kFrameHeadBytes]) {
  Bytes head;
  head.reserve(kFrameHeadBytes);
  const size_t start = net::frame::begin(&head, kMagic, uint8_t(kind));
  bytes::put(head, id);
  net::frame::finish(&head, start);
  const uint64_t len = uint64_t(kIdBytes) + payload_size;
  COHORT_INTERNAL(len <= UINT32_MAX, "service frame body of ", len,
                  " bytes does not fit a u32 length");
  bytes::store(head.data() + 5, uint32_t(len));
  std::copy(head.begin(), head.end(), out);
}

void encode_frame(Kind kind, uint64_t id, std::span<const uint8_t> payload, Bytes* out) {
  const size_t start = net::frame::begin(out, kMagic, uint8_t(kind));
  bytes::put(*out, id);
  out->insert(out->end(), payload.begin(), payload.end());
  net::frame::finish(out, start);
}

}  // namespace cohort::net::service
