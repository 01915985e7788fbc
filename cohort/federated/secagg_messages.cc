#include "cohort/federated/secagg_messages.h"

#include <cstring>
#include <utility>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"

namespace cohort::federated::secagg::msg {
namespace {

constexpr uint32_t kMagic = 0x31415343;  // "CSA1" read as little-endian bytes
constexpr size_t kHeaderBytes = 4 + 1 + 8 + 4;

class Writer {
 public:
  Writer() = default;  // a bare body: the plaintext inside a sealed share
  explicit Writer(const Header& h) {
    u32(kMagic);
    u8(static_cast<uint8_t>(h.phase));
    u64(h.round);
    u32(h.user);
  }
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { bytes::put(out_, v); }
  void u64(uint64_t v) { bytes::put(out_, v); }
  void raw(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void key(const crypto::Key& k) { raw(k.data(), k.size()); }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

// Reads one message front to back; every shortfall is an InvalidArgument with the message's
// context and what was being read.
class Reader {
 public:
  // A bare body (no header), e.g. a decrypted share; errors carry `ctx`.
  Reader(const Bytes& b, std::string ctx) : b_(b), ctx_(std::move(ctx)) {}
  Reader(const Bytes& b, const Header& expect)
      : b_(b), ctx_(context(expect.round, expect.phase, expect.user)) {
    COHORT_CHECK_ARG(b.size() >= kHeaderBytes, ctx_, "message of ", b.size(),
                     " bytes is shorter than the ", kHeaderBytes, "-byte header");
    COHORT_CHECK_ARG(u32("magic") == kMagic, ctx_, "not a secure-aggregation message (bad magic)");
    const uint8_t phase = u8("phase");
    COHORT_CHECK_ARG(phase == static_cast<uint8_t>(expect.phase), ctx_, "expected a ",
                     phase_name(expect.phase), " message, got phase byte ", int{phase});
    const uint64_t round = u64("round");
    COHORT_CHECK_ARG(round == expect.round, ctx_, "message is for round ", round,
                     ", expected round ", expect.round);
    const uint32_t user = u32("user");
    COHORT_CHECK_ARG(user == expect.user, ctx_, "message names user ", user, ", expected ",
                     expect.user);
  }
  const std::string& ctx() const { return ctx_; }
  void need(uint64_t n, const char* what) {
    COHORT_CHECK_ARG(n <= b_.size() - pos_, ctx_, "truncated: ", what, " needs ", n,
                     " bytes, only ", b_.size() - pos_, " left");
  }
  uint8_t u8(const char* what) { return le<uint8_t>(what); }
  uint32_t u32(const char* what) { return le<uint32_t>(what); }
  uint64_t u64(const char* what) { return le<uint64_t>(what); }
  crypto::Key key(const char* what) {
    need(crypto::kKeyBytes, what);
    crypto::Key k;
    std::memcpy(k.data(), b_.data() + pos_, k.size());
    pos_ += k.size();
    return k;
  }
  Bytes raw(size_t n, const char* what) {
    need(n, what);
    Bytes out(b_.begin() + pos_, b_.begin() + pos_ + n);
    pos_ += n;
    return out;
  }
  // A count followed by `count` entries of `entry_bytes` each: refused before any allocation
  // when the bytes cannot hold them (a forged count must not allocate gigabytes).
  uint32_t count(size_t entry_bytes, const char* what) {
    const uint32_t n = u32(what);
    need(uint64_t{n} * entry_bytes, what);
    return n;
  }
  void finish() {
    COHORT_CHECK_ARG(pos_ == b_.size(), ctx_, b_.size() - pos_,
                     " unexpected trailing bytes after the message body");
  }

 private:
  // Its own reader rather than bytes::Reader: errors carry the round, phase and user of the
  // message (ctx_) and name the field being read.
  template <typename T>
  T le(const char* what) {
    need(sizeof(T), what);
    const T v = bytes::load<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  const Bytes& b_;
  std::string ctx_;
  size_t pos_ = 0;
};

std::vector<uint64_t> read_elems(Reader& r, size_t n, const char* what) {
  std::vector<uint64_t> y(n);
  for (auto& e : y) {
    e = r.u64(what);
    COHORT_CHECK_ARG(e < shamir::kPrime, r.ctx(), what, " holds a value outside the field");
  }
  return y;
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kAdvertise:
      return "AdvertiseKeys";
    case Phase::kRoster:
      return "Roster";
    case Phase::kShares:
      return "ShareKeys";
    case Phase::kSharesFor:
      return "ShareKeys (forwarded)";
    case Phase::kMasked:
      return "MaskedInput";
    case Phase::kSurvivors:
      return "Unmasking (survivors)";
    case Phase::kUnmask:
      return "Unmasking";
  }
  return "unknown phase";
}

std::string context(uint64_t round, Phase phase, uint32_t user) {
  std::string who = user == kEveryone ? "all users" : "user " + std::to_string(user);
  return "secagg round " + std::to_string(round) + ", phase " + phase_name(phase) + ", " + who +
         ": ";
}

Bytes encode_advertise(const Header& h, const crypto::Key& c_pk, const crypto::Key& s_pk) {
  Writer w(h);
  w.key(c_pk);
  w.key(s_pk);
  return w.take();
}

UserKeys decode_advertise(const Bytes& b, const Header& expect) {
  Reader r(b, expect);
  UserKeys k{expect.user, r.key("c_pk"), r.key("s_pk")};
  r.finish();
  return k;
}

Bytes encode_roster(const Header& h, const Roster& roster) {
  Writer w(h);
  w.u32(roster.threshold);
  w.u64(roster.length);
  w.u32(static_cast<uint32_t>(roster.users.size()));
  for (const UserKeys& u : roster.users) {
    w.u32(u.id);
    w.key(u.c_pk);
    w.key(u.s_pk);
  }
  return w.take();
}

Roster decode_roster(const Bytes& b, const Header& expect) {
  Reader r(b, expect);
  Roster roster;
  roster.threshold = r.u32("threshold");
  roster.length = r.u64("length");
  const uint32_t n = r.count(4 + 2 * crypto::kKeyBytes, "roster entries");
  for (uint32_t i = 0; i < n; ++i) {
    UserKeys u;
    u.id = r.u32("roster id");
    COHORT_CHECK_ARG(roster.users.empty() || u.id > roster.users.back().id, r.ctx(),
                     "roster ids must increase strictly, got ", u.id, " after ",
                     roster.users.back().id);
    u.c_pk = r.key("c_pk");
    u.s_pk = r.key("s_pk");
    roster.users.push_back(u);
  }
  r.finish();
  return roster;
}

Bytes encode_sealed(const Header& h, const std::vector<Sealed>& list) {
  Writer w(h);
  w.u32(static_cast<uint32_t>(list.size()));
  for (const Sealed& s : list) {
    w.u32(s.peer);
    w.raw(s.bytes.data(), s.bytes.size());
  }
  return w.take();
}

std::vector<Sealed> decode_sealed(const Bytes& b, const Header& expect) {
  Reader r(b, expect);
  const uint32_t n = r.count(4 + kSealedBytes, "sealed shares");
  std::vector<Sealed> list(n);
  for (Sealed& s : list) {
    s.peer = r.u32("peer id");
    s.bytes = r.raw(kSealedBytes, "sealed share");
  }
  r.finish();
  return list;
}

Bytes encode_masked(const Header& h, const std::vector<uint64_t>& y) {
  Writer w(h);
  w.u64(y.size());
  for (uint64_t v : y) w.u64(v);
  return w.take();
}

std::vector<uint64_t> decode_masked(const Bytes& b, const Header& expect, uint64_t length) {
  Reader r(b, expect);
  const uint64_t n = r.u64("length");
  COHORT_CHECK_ARG(n == length, r.ctx(), "masked vector of length ", n, ", expected ", length);
  r.need(n * 8, "masked vector");
  std::vector<uint64_t> y(n);
  for (auto& v : y) v = r.u64("masked element");
  r.finish();
  return y;
}

Bytes encode_survivors(const Header& h, const Survivors& s) {
  Writer w(h);
  for (const auto* list : {&s.survivors, &s.dropped}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (uint32_t id : *list) w.u32(id);
  }
  return w.take();
}

Survivors decode_survivors(const Bytes& b, const Header& expect) {
  Reader r(b, expect);
  Survivors s;
  for (auto* list : {&s.survivors, &s.dropped}) {
    list->resize(r.count(4, "id list"));
    for (uint32_t& id : *list) id = r.u32("id");
  }
  r.finish();
  return s;
}

Bytes encode_unmask(const Header& h, const std::vector<UnmaskEntry>& entries) {
  Writer w(h);
  w.u32(static_cast<uint32_t>(entries.size()));
  for (const UnmaskEntry& e : entries) {
    w.u32(e.owner);
    w.u8(static_cast<uint8_t>(e.kind));
    for (uint64_t v : e.y) w.u64(v);
  }
  return w.take();
}

std::vector<UnmaskEntry> decode_unmask(const Bytes& b, const Header& expect) {
  Reader r(b, expect);
  std::vector<UnmaskEntry> entries(r.count(4 + 1 + kShareElems * 8, "unmask entries"));
  for (UnmaskEntry& e : entries) {
    e.owner = r.u32("owner id");
    const uint8_t kind = r.u8("share kind");
    COHORT_CHECK_ARG(kind <= 1, r.ctx(), "share kind ", int{kind}, " for user ", e.owner,
                     ", expected 0 (self-mask seed) or 1 (mask key)");
    e.kind = static_cast<ShareKind>(kind);
    e.y = read_elems(r, kShareElems, "share");
  }
  r.finish();
  return entries;
}

Bytes encode_share_plain(const SharePlain& p) {
  Writer w;  // no header: the AAD binds round and pair instead
  w.u32(p.from);
  w.u32(p.to);
  for (uint64_t v : p.s_share) w.u64(v);
  for (uint64_t v : p.b_share) w.u64(v);
  return w.take();
}

SharePlain decode_share_plain(const Bytes& b, const Header& h) {
  Reader r(b, context(h.round, h.phase, h.user) + "decrypted share: ");
  SharePlain p;
  p.from = r.u32("from");
  p.to = r.u32("to");
  p.s_share = read_elems(r, kShareElems, "share of s_SK");
  p.b_share = read_elems(r, kShareElems, "share of b");
  r.finish();
  return p;
}

Bytes share_aad(uint64_t round, uint32_t from, uint32_t to) {
  Writer w({Phase::kShares, round, from});
  w.u32(to);
  return w.take();
}

}  // namespace cohort::federated::secagg::msg
