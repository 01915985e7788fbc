#pragma once
// Wire format of the secure-aggregation messages (secagg.h), with a strict parser.
//
// Every message: magic "CSA1" | phase u8 | round u64 | user u32 | body. All integers are
// little-endian. `user` is the sender for what a client sends, the recipient for what the
// server sends to one client, and kEveryone for what it broadcasts. Bodies:
//   Advertise  c_pk[32] s_pk[32]
//   Roster     threshold u32 | length u64 | count u32 | count x (id u32, c_pk[32], s_pk[32])
//   Shares     count u32 | count x (to u32, sealed[kSealedBytes])       client -> server
//   SharesFor  count u32 | count x (from u32, sealed[kSealedBytes])     server -> one client
//   Masked     length u64 | length x u64
//   Survivors  count u32 | ids u32... | count u32 | dropped ids u32...
//   Unmask     count u32 | count x (owner u32, kind u8, kShareElems x u64)
// sealed = AES-GCM(nonce | E(from u32, to u32, share of s_SK, share of b) | tag).
//
// The decoders check structure only (header, exact sizes, no trailing bytes, counts that fit
// the bytes present, a roster in increasing id order); who may send what is for secagg.cc,
// which knows the round's state. Any failure is InvalidArgument whose message starts with
// "secagg round R, phase P, user U:" and says what was expected.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/federated/secagg_crypto.h"
#include "cohort/federated/shamir.h"

namespace cohort::federated::secagg::msg {

using Bytes = std::vector<uint8_t>;

enum class Phase : uint8_t {
  kAdvertise = 1,
  kRoster = 2,
  kShares = 3,
  kSharesFor = 4,
  kMasked = 5,
  kSurvivors = 6,
  kUnmask = 7,
};
const char* phase_name(Phase p);

inline constexpr uint32_t kEveryone = 0xFFFFFFFFu;
// HKDF labels: the one key agreement per pair and key kind gives two unrelated keys per round.
inline constexpr const char* kShareLabel = "cohort secagg v1 share key";
inline constexpr const char* kMaskLabel = "cohort secagg v1 pairwise mask";
inline constexpr size_t kSecretBytes = crypto::kKeyBytes;  // s_SK and b are both 32 bytes
inline constexpr size_t kShareElems = shamir::chunks_for(kSecretBytes);
inline constexpr size_t kSharePlainBytes = 4 + 4 + 2 * kShareElems * 8;
inline constexpr size_t kSealedBytes = crypto::kNonceBytes + kSharePlainBytes + crypto::kTagBytes;

// "secagg round R, phase P, user U: " — the prefix of every error about one message.
std::string context(uint64_t round, Phase phase, uint32_t user);

struct Header {
  Phase phase;
  uint64_t round;
  uint32_t user;
};

struct UserKeys {
  uint32_t id = 0;
  crypto::Key c_pk{};  // encrypts the shares sent to this user
  crypto::Key s_pk{};  // agrees the pairwise masks
};
struct Roster {
  uint32_t threshold = 0;
  uint64_t length = 0;
  std::vector<UserKeys> users;  // increasing id
};
struct Sealed {
  uint32_t peer = 0;  // the recipient (Shares) or the sender (SharesFor)
  Bytes bytes;        // kSealedBytes
};
enum class ShareKind : uint8_t { kSelfMask = 0, kMaskKey = 1 };  // b_v, or s_v^SK
struct UnmaskEntry {
  uint32_t owner = 0;  // whose secret this is a share of
  ShareKind kind = ShareKind::kSelfMask;
  std::vector<uint64_t> y;  // kShareElems field elements
};
struct Survivors {
  std::vector<uint32_t> survivors;  // U3
  std::vector<uint32_t> dropped;    // U2 \ U3
};

Bytes encode_advertise(const Header& h, const crypto::Key& c_pk, const crypto::Key& s_pk);
Bytes encode_roster(const Header& h, const Roster& r);
Bytes encode_sealed(const Header& h, const std::vector<Sealed>& list);  // Shares, SharesFor
Bytes encode_masked(const Header& h, const std::vector<uint64_t>& y);
Bytes encode_survivors(const Header& h, const Survivors& s);
Bytes encode_unmask(const Header& h, const std::vector<UnmaskEntry>& entries);

// Each decoder checks the header against `expect` (phase, round, user) first.
UserKeys decode_advertise(const Bytes& b, const Header& expect);
Roster decode_roster(const Bytes& b, const Header& expect);
std::vector<Sealed> decode_sealed(const Bytes& b, const Header& expect);
std::vector<uint64_t> decode_masked(const Bytes& b, const Header& expect, uint64_t length);
Survivors decode_survivors(const Bytes& b, const Header& expect);
std::vector<UnmaskEntry> decode_unmask(const Bytes& b, const Header& expect);

// The plaintext inside a sealed share, and the AAD that binds it to the round and the pair.
struct SharePlain {
  uint32_t from = 0, to = 0;
  std::vector<uint64_t> s_share, b_share;
};
Bytes encode_share_plain(const SharePlain& p);
SharePlain decode_share_plain(const Bytes& b, const Header& context_for_errors);
Bytes share_aad(uint64_t round, uint32_t from, uint32_t to);

}  // namespace cohort::federated::secagg::msg
