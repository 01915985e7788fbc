#include "cohort/net/frame.h"

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
  const uint32_t len = load_u32(buf.data() + 5);
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
  put_u32(out, magic);
  out->push_back(kind);
  put_u32(out, 0);
  return start;
}

void finish(std::vector<uint8_t>* out, size_t start) {
  const size_t len = out->size() - start - kHeaderBytes;
  COHORT_INTERNAL(len <= UINT32_MAX, "frame body of ", len, " bytes does not fit a u32 length");
  for (int i = 0; i < 4; ++i) (*out)[start + 5 + i] = uint8_t(len >> (8 * i));
}

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(uint8_t(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(uint8_t(v >> (8 * i)));
}

uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint64_t load_u64(const uint8_t* p) {
  return uint64_t(load_u32(p)) | uint64_t(load_u32(p + 4)) << 32;
}

}  // namespace cohort::net::frame
