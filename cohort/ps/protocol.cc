#include "cohort/ps/protocol.h"

#include <cstring>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::ps {
namespace {

// kind u8, rank i32, step i64, begin i64, end i64, codec u8, flags u8, then a zero byte.
constexpr size_t kPushPadBytes = 1;
constexpr size_t kPushHeaderBytes = 1 + 4 + 3 * 8 + 1 + 1 + kPushPadBytes;
constexpr uint8_t kPushShared = 1;  // flags: the grads are in the worker's shared area
static_assert(kPushHeaderBytes == 32);

using bytes::put;

// Every message reader names the parameter server in its errors.
class Reader : public bytes::Reader {
 public:
  explicit Reader(const Bytes& b) : bytes::Reader(b, "parameter server message") {}
};

}  // namespace

int64_t publish_server(rendezvous::Store& store, int index, const std::string& address) {
  const int64_t generation = store.add(generation_key(index), 1);
  store.set_string(server_key(index, generation), address);
  return generation;
}

Bytes encode_hello(const Hello& h) {
  Bytes b;
  put(b, MsgKind::kHello);
  put(b, h.rank);
  put(b, h.num_workers);
  put(b, h.total_steps);
  put(b, uint32_t(h.layout.params.size()));
  for (const ParamSlot& p : h.layout.params) {
    put(b, uint32_t(p.name.size()));
    b.insert(b.end(), p.name.begin(), p.name.end());
    put(b, p.numel);
  }
  put(b, h.codec.method);
  put(b, h.codec.ratio);
  put(b, h.codec.levels);
  put(b, h.codec.seed);
  if (h.shared) {
    bytes::put_string(b, h.shared->name);
    b.insert(b.end(), h.shared->token.begin(), h.shared->token.end());
    put(b, h.shared->count);
  }
  return b;
}

Bytes encode_hello_reply(const HelloReply& r) {
  Bytes b;
  put(b, r.next_step);
  put(b, r.checkpoints);
  put(b, r.shared);
  return b;
}

HelloReply decode_hello_reply(const Bytes& b, const std::string& what) {
  COHORT_CHECK_ARG(b.size() == 10, what, ": expected a 10-byte answer, got ", b.size(), " bytes");
  Reader r(b);
  HelloReply h;
  h.next_step = r.get<int64_t>();
  h.checkpoints = r.get<uint8_t>();
  h.shared = r.get<uint8_t>();
  COHORT_CHECK_ARG(h.shared <= 1, what, ": shared = ", int(h.shared), " (expected 0 or 1)");
  return h;
}

Bytes encode_simple(MsgKind kind, int32_t rank) {
  Bytes b;
  put(b, kind);
  put(b, rank);
  return b;
}

Bytes encode_bye(int32_t rank, bool wants_final) {
  Bytes b = encode_simple(MsgKind::kBye, rank);
  if (wants_final) put(b, uint8_t(1));
  return b;
}

bool wants_final(const Bytes& bye) {
  return bye.size() > 1 + sizeof(int32_t) && bye[1 + sizeof(int32_t)] != 0;
}

namespace {

// The 32-byte push header, with room reserved for `body` bytes after it.
Bytes push_header(int32_t rank, int64_t step, KeyRange range, uint8_t codec, size_t body,
                  uint8_t flags = 0) {
  Bytes b;
  b.reserve(kPushHeaderBytes + body);
  put(b, MsgKind::kPush);
  put(b, rank);
  put(b, step);
  put(b, range.begin);
  put(b, range.end);
  put(b, codec);
  put(b, flags);
  b.resize(kPushHeaderBytes, 0);  // padding: the grads start 32 bytes in
  return b;
}

}  // namespace

Bytes encode_push(int32_t rank, int64_t step, KeyRange range, const float* grads) {
  const size_t n = size_t(range.size()) * sizeof(float);
  Bytes b = push_header(rank, step, range, 0, n);
  const auto* p = reinterpret_cast<const uint8_t*>(grads);
  b.insert(b.end(), p, p + n);
  return b;
}

Bytes encode_shared_push(int32_t rank, int64_t step, KeyRange range) {
  return push_header(rank, step, range, 0, 0, kPushShared);
}

Bytes encode_push_frame(int32_t rank, int64_t step, KeyRange range, uint8_t codec,
                        size_t message_bytes) {
  COHORT_CHECK_ARG(codec != 0, "encode_push_frame: codec 0 is an uncompressed push (encode_push)");
  Bytes b = push_header(rank, step, range, codec, message_bytes);
  b.resize(kPushHeaderBytes + message_bytes, 0);
  return b;
}

std::span<uint8_t> push_message(Bytes& frame) {
  COHORT_CHECK_ARG(frame.size() >= kPushHeaderBytes, "push_message: not a push frame");
  return {frame.data() + kPushHeaderBytes, frame.size() - kPushHeaderBytes};
}

MsgKind peek_kind(const Bytes& b) {
  COHORT_CHECK_ARG(!b.empty() && b[0] >= 1 && b[0] <= 5, "parameter server: unknown message kind ",
                   b.empty() ? -1 : int(b[0]));
  return MsgKind(b[0]);
}

int32_t peek_rank(const Bytes& b) {
  Reader r(b);
  r.get<MsgKind>();
  return r.get<int32_t>();
}

Hello decode_hello(const Bytes& b) {
  Reader r(b);
  r.get<MsgKind>();
  Hello h;
  h.rank = r.get<int32_t>();
  h.num_workers = r.get<int32_t>();
  h.total_steps = r.get<int64_t>();
  const uint32_t n = r.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    ParamSlot p;
    p.name = r.get_string();
    p.numel = r.get<int64_t>();
    p.offset = h.layout.total;
    p.index = i;
    h.layout.total += p.numel;
    h.layout.params.push_back(std::move(p));
  }
  h.codec.method = r.get<uint8_t>();
  h.codec.ratio = r.get<double>();
  h.codec.levels = r.get<int32_t>();
  h.codec.seed = r.get<uint64_t>();
  if (r.remaining() == 0) return h;  // no shared area offered
  SharedOffer o;
  o.name = r.get_string(256);
  r.get_array(o.token.data(), o.token.size());
  o.count = r.get<int64_t>();
  r.expect_end();
  h.shared = std::move(o);
  return h;
}

Push decode_push(const Bytes& b) {
  Reader r(b);
  r.get<MsgKind>();
  Push p;
  p.rank = r.get<int32_t>();
  p.step = r.get<int64_t>();
  p.range.begin = r.get<int64_t>();
  p.range.end = r.get<int64_t>();
  p.codec = r.get<uint8_t>();
  const uint8_t flags = r.get<uint8_t>();
  COHORT_CHECK_ARG(flags <= kPushShared, "parameter server: push flags ", int(flags),
                   " (expected 0 or 1)");
  for (size_t i = 0; i < kPushPadBytes; ++i)
    COHORT_CHECK_ARG(r.get<uint8_t>() == 0, "parameter server: push header padding is not zero");
  size_t n = 0;
  const uint8_t* rest = r.rest(&n);
  if (flags == kPushShared) {
    COHORT_CHECK_ARG(p.codec == 0 && n == 0,
                     "parameter server: a push marked as in shared memory carries ", n,
                     " bytes (codec ", int(p.codec), "); expected none and codec 0");
    COHORT_CHECK_ARG(p.range.end >= p.range.begin, "parameter server: push of keys [",
                     p.range.begin, ", ", p.range.end, ")");
    p.shared = true;
    p.count = p.range.size();
    return p;
  }
  p.grads = rest;
  p.bytes = n;
  if (p.codec != 0) return p;  // a message: its size is checked against its codec's
  COHORT_CHECK_ARG(n % sizeof(float) == 0, "parameter server: push of ", n,
                   " bytes is not a whole number of f32 values");
  p.count = int64_t(n / sizeof(float));
  return p;
}

Bytes floats_to_bytes(const float* v, int64_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  return Bytes(p, p + size_t(n) * sizeof(float));
}

Bytes encode_push_reply(const PushReply& r, const float* v, int64_t n) {
  Bytes b;
  COHORT_CHECK_ARG((v == nullptr) == (r.shared != 0),
                   "encode_push_reply: values must be given unless they are in the shared area");
  b.reserve(8 + 4 + 4 + 1 + 8 + 8 + 1 + (v ? size_t(n) * sizeof(float) : 0));
  put(b, r.version);
  put(b, r.staleness);
  put(b, r.lead);
  put(b, r.dropped);
  put(b, r.held_s);
  put(b, r.durable);
  put(b, r.shared);
  if (v == nullptr) return b;
  const auto* p = reinterpret_cast<const uint8_t*>(v);
  b.insert(b.end(), p, p + size_t(n) * sizeof(float));
  return b;
}

PushReply decode_push_reply(const Bytes& b, float* out, int64_t n, const std::string& what,
                            const float* shared) {
  Reader r(b);
  PushReply p;
  p.version = r.get<int64_t>();
  p.staleness = r.get<int32_t>();
  p.lead = r.get<int32_t>();
  p.dropped = r.get<uint8_t>();
  p.held_s = r.get<double>();
  p.durable = r.get<int64_t>();
  p.shared = r.get<uint8_t>();
  size_t rest = 0;
  const uint8_t* v = r.rest(&rest);
  if (p.shared != 0) {
    COHORT_CHECK_ARG(p.shared == 1 && shared != nullptr && rest == 0, what,
                     ": the values are said to be in the shared area (", int(p.shared), ", ", rest,
                     " bytes follow), but this push was not sent through one");
    if (out != shared) std::memcpy(out, shared, size_t(n) * sizeof(float));
    return p;
  }
  COHORT_CHECK_ARG(rest == size_t(n) * sizeof(float), what, ": expected ", n, " f32 values, got ",
                   rest, " bytes");
  std::memcpy(out, v, rest);
  return p;
}

Bytes encode_final(const FinalState& f, const float* v, int64_t n) {
  Bytes b;
  put(b, uint8_t(f.done));
  put(b, f.finished);
  put(b, f.workers);
  put(b, f.progress);
  if (f.done) {
    const auto* p = reinterpret_cast<const uint8_t*>(v);
    b.insert(b.end(), p, p + size_t(n) * sizeof(float));
  }
  return b;
}

FinalState decode_final(const Bytes& b, float* out, int64_t n, const std::string& what) {
  Reader r(b);
  FinalState f;
  f.done = r.get<uint8_t>() != 0;
  f.finished = r.get<int32_t>();
  f.workers = r.get<int32_t>();
  f.progress = r.get<int64_t>();
  size_t rest = 0;
  const uint8_t* v = r.rest(&rest);
  const size_t want = f.done ? size_t(n) * sizeof(float) : 0;
  COHORT_CHECK_ARG(rest == want, what, ": expected ", want, " bytes of values, got ", rest);
  if (f.done) std::memcpy(out, v, rest);
  return f;
}

void bytes_to_floats(const Bytes& b, float* out, int64_t n, const std::string& what) {
  COHORT_CHECK_ARG(b.size() == size_t(n) * sizeof(float), what, ": expected ", n,
                   " f32 values, got ", b.size(), " bytes");
  std::memcpy(out, b.data(), b.size());
}

}  // namespace cohort::ps
