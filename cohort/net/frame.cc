#include "cohort/net/frame.h"

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::net::frame {
namespace {

Result malformed(std::string why) {
  return Result{Status::kMalformed, 0, std::move(why)};
}

}  // namespace

Result parse(std::span<const uint8_t> buf, const Spec& spec, Frame* out) {
  // The magic on the bytes present, so garbage is refused at its first byte.
  for (size_t i = 0; i < 4 && i < buf.size(); ++i)
    if (buf[i] != uint8_t(spec.magic >> (8 * i)))
      return malformed(
          detail::str("bad ", spec.frame_name, " magic (not a ", spec.peer_name, "?)"));
  if (buf.size() > 4 && (buf[4] < spec.min_kind || buf[4] > spec.max_kind))
    return malformed(detail::str("unknown ", spec.kind_name, " byte ", int(buf[4])));
  if (buf.size() < kHeaderBytes) return Result{};
  const uint32_t len = bytes::load<uint32_t>(buf.data() + 5);
  if (len > spec.max_body)
    return malformed(detail::str(spec.frame_name, " body length ", len, " exceeds the limit of ",
                                 spec.max_body));
  const size_t total = kHeaderBytes + len;
  if (buf.size() < total) return Result{Status::kNeedMore, total, {}};
  out->kind = buf[4];
  out->body = buf.subspan(kHeaderBytes, len);
  return Result{Status::kOk, total, {}};
}

size_t begin(std::vector<uint8_t>* out, uint32_t magic, uint8_t kind) {
  const size_t start = out->size();
  bytes::put(*out, magic);
  out->push_back(kind);
  bytes::put(*out, uint32_t{0});
  return start;
}

void finish(std::vector<uint8_t>* out, size_t start) {
  const size_t len = out->size() - start - kHeaderBytes;
  COHORT_INTERNAL(len <= UINT32_MAX, "frame body of ", len, " bytes does not fit a u32 length");
  bytes::store(out->data() + start + 5, uint32_t(len));
}

}  // namespace cohort::net::frame
