#pragma once
// Secure aggregation for federated learning, after Bonawitz et al., "Practical Secure
// Aggregation for Privacy-Preserving Machine Learning" (CCS 2017): the server learns the sum of
// the users' vectors and nothing else about any one of them, and the sum survives users who
// drop out mid-round.
//
// These are pure protocol objects: no network, no threads, no clocks. Each method takes and
// returns byte strings; the integrator carries them (client -> server -> client) and decides
// when a phase closes (a deadline). One Client per user per round, one Server per round.
//
// The round, for users U1 (those who advertised), threshold t, vectors in Z_2^64:
//   0 AdvertiseKeys  u: two X25519 pairs, c_u (encrypts shares) and s_u (agrees masks); sends
//                    both public keys. Server: roster() = U1's keys, broadcast to all.
//   1 ShareKeys      u: draws a self-mask seed b_u; Shamir-shares s_u^SK and b_u (t of |U1|,
//                    x = roster index + 1); for each v != u seals (u, v, shares) with
//                    AES-256-GCM under HKDF(X25519(c_u^SK, c_v^PK), round), AAD = (round, u, v).
//                    Server: close_shares(); U2 = who sent; shares_for(v) = what was sealed to v.
//   2 MaskedInput    u: y_u = x_u + PRG(b_u) + sum_{v in U2, v > u} p_uv - sum_{v < u} p_uv,
//                    p_uv = PRG(HKDF(X25519(s_u^SK, s_v^PK), round)) (so p_uv = p_vu), PRG =
//                    AES-256-CTR. Server: survivors(); U3 = who sent y_u.
//   3 Unmasking      u in U3, told U3 and U2 \ U3: returns its share of b_v for each v in U3
//                    (itself included) and of s_v^SK for each v in U2 \ U3 — never both for one
//                    v (that would let the server strip v's masks and read x_v: a survivors
//                    message naming a user on both sides is refused). Server, with >= t
//                    answers: rebuilds each b_v and each dropped s_v^SK (checked against the
//                    advertised s_v^PK), removes those masks, and aggregate() = sum_{U3} x_u.
//   Pairwise masks between two members of U3 cancel in the sum; the rest are removed above.
//
// Threat model: semi-honest (honest-but-curious) server and users: everyone follows the
// protocol, and the server, together with fewer than t users, learns nothing about an honest
// user's input beyond the sum over U3. The signature round and consistency check of the
// paper's malicious variant are left out on purpose: the transport is already authenticated
// (TLS plus the job secret), so the server cannot impersonate users, and a server that lies
// about who dropped is outside this model. t trades the two: a round survives up to |U1| - t
// dropouts, and privacy holds against the server plus up to t - 1 colluding users; the paper
// takes t > |U1| / 2 (also what the malicious variant needs). Keys and seeds are fresh per
// round; secrets are wiped once used. The self-mask seeds b_v are rebuilt unchecked (a wrong
// share gives a wrong sum); a dropped user's s_v^SK is checked against its advertised key.
//
// Cost per round, n = |U1|, L = vector length: n(n-1) sealed shares (about 120 bytes each) go
// through the server; each user does 2(n-1) X25519 agreements and n PRG expansions of 8L bytes
// (n-1 pairwise masks + its self mask) and uploads 8L bytes; the server does |U3| self-mask and
// |U3| * |U2 \ U3| pairwise expansions and |U2| Shamir reconstructions.
//
// Errors: a malformed or unexpected message (wrong round or phase, wrong length, a truncated
// or oversized body, an unknown sender, a second message from one sender in one phase, a key
// that is not usable) is InvalidArgument naming the round, the phase and the user, and what
// was expected. Too few users left to go on is TooFewUsers (an IoError: retry the round).
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/federated/secagg_crypto.h"
#include "cohort/federated/secagg_messages.h"

namespace cohort::federated::secagg {

using Bytes = std::vector<uint8_t>;

struct Params {
  uint64_t round = 0;  // bound into every message, key derivation and AAD
  int threshold = 0;   // t: shares needed to rebuild a secret, users needed to finish (>= 2)
  size_t length = 0;   // uint64 elements per vector
};

// Fewer than t users are left in `phase`: the round cannot finish; start a new one.
class TooFewUsers : public ErrorKind<TooFewUsers, IoError> {
 public:
  using ErrorKind::ErrorKind;
  TooFewUsers(uint64_t round, const std::string& phase, size_t left, int threshold);
  // Zero/empty when built from a message alone (rethrow_with_context).
  const std::string& phase() const { return phase_; }
  size_t left() const { return left_; }
  int threshold() const { return threshold_; }

 private:
  std::string phase_;
  size_t left_ = 0;
  int threshold_ = 0;
};

class Client {  // one per user per round; call the four phases in order, once each
 public:
  Client(uint32_t id, Params params);
  ~Client();
  Client(Client&&) = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Bytes advertise();                                                            // phase 0
  Bytes share_keys(const Bytes& roster);                                        // phase 1
  Bytes masked_input(std::span<const uint64_t> x, const Bytes& shares_for_me);  // phase 2
  Bytes unmask(const Bytes& survivors);                                         // phase 3
  uint32_t id() const { return id_; }

 private:
  enum class Step { kNew, kAdvertised, kShared, kMasked, kDone };
  struct Held {  // the shares this user holds of one owner's secrets
    std::vector<uint64_t> s_share, b_share;
  };
  void expect_step(Step want, const char* call) const;
  void check_roster(const msg::Roster& r) const;
  crypto::Key pair_key(const crypto::Key& secret, const crypto::Key& peer, const char* label,
                       uint32_t peer_id, msg::Phase phase) const;
  void open_shares(const Bytes& shares_for_me);
  void wipe_secrets();

  uint32_t id_;
  Params params_;
  Step step_ = Step::kNew;
  crypto::KeyPair c_, s_;
  crypto::Key b_{};
  std::map<uint32_t, msg::UserKeys> roster_;  // U1
  std::map<uint32_t, Held> held_;             // by owner; the owners are U2
};

class Server {  // one per round
 public:
  explicit Server(Params params);

  void add_advertise(uint32_t id, const Bytes& m);
  Bytes roster();  // closes phase 0; the same bytes on every call
  void add_shares(uint32_t id, const Bytes& m);
  void close_shares();            // closes phase 1
  Bytes shares_for(uint32_t id);  // after close_shares(), for each id in U2
  void add_masked(uint32_t id, const Bytes& m);
  Bytes survivors();  // closes phase 2; the same bytes on every call
  void add_unmask(uint32_t id, const Bytes& m);
  std::vector<uint64_t> aggregate();  // sum over U3, exact in Z_2^64; needs >= t unmask answers
  std::vector<uint32_t> contributors() const;  // U3, once survivors() closed phase 2

 private:
  enum class Step { kAdvertise, kShares, kMasked, kUnmask };
  void expect_step(Step want, msg::Phase phase, uint32_t id) const;
  void check_unmask(uint32_t id, const std::vector<msg::UnmaskEntry>& entries) const;
  crypto::Key rebuild(uint32_t owner) const;
  void remove_dropped_masks(uint32_t dropped, std::vector<uint64_t>& sum) const;

  Params params_;
  Step step_ = Step::kAdvertise;
  std::map<uint32_t, msg::UserKeys> roster_;  // U1
  std::map<uint32_t, size_t> index_;          // id -> roster index (x - 1)
  Bytes roster_bytes_;
  std::map<uint32_t, std::vector<msg::Sealed>> sent_shares_;  // by sender, until closed
  std::map<uint32_t, std::vector<msg::Sealed>> inbox_;        // by recipient, once closed
  std::set<uint32_t> u2_;                                     // who sent shares
  std::set<uint32_t> u3_;                                     // who sent y_u
  std::vector<uint64_t> masked_sum_;                          // sum of y_u over U3
  Bytes survivors_bytes_;
  // responder -> owner -> its share of the owner's b (owner in U3) or s^SK (owner dropped)
  std::map<uint32_t, std::map<uint32_t, std::vector<uint64_t>>> unmasks_;
};

}  // namespace cohort::federated::secagg
