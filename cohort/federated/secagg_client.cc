// The user's side of secure aggregation (secagg.h): phases 0-3 of one round.
#include <algorithm>
#include <set>

#include "cohort/federated/secagg.h"

namespace cohort::federated::secagg {
namespace {

using msg::Phase;

using msg::kMaskLabel;
using msg::kShareLabel;

const char* step_name(int step) {
  static const char* const kNames[] = {"before advertise()", "after advertise()",
                                       "after share_keys()", "after masked_input()",
                                       "after unmask()"};
  return kNames[step];
}

}  // namespace

TooFewUsers::TooFewUsers(uint64_t round, const std::string& phase, size_t left, int threshold)
    : ErrorKind(detail::str("secagg round ", round, ", phase ", phase, ": only ", left,
                            " users left, fewer than the threshold t = ", threshold,
                            "; the round cannot finish, start a new one")),
      phase_(phase),
      left_(left),
      threshold_(threshold) {}

Client::Client(uint32_t id, Params params) : id_(id), params_(params) {
  COHORT_CHECK_ARG(id != msg::kEveryone, "secagg: user id ", id, " is reserved");
  COHORT_CHECK_ARG(params.threshold >= 2, "secagg user ", id, ": threshold ", params.threshold,
                   " must be >= 2 (with t = 1 every share is the secret itself)");
  COHORT_CHECK_ARG(params.length > 0, "secagg user ", id, ": vector length must be > 0");
}

Client::~Client() {
  wipe_secrets();
}

void Client::wipe_secrets() {
  crypto::wipe(c_.secret);
  crypto::wipe(s_.secret);
  crypto::wipe(b_);
}

void Client::expect_step(Step want, const char* call) const {
  COHORT_CHECK_ARG(step_ == want, "secagg round ", params_.round, ", user ", id_, ": ", call,
                   " called ", step_name(static_cast<int>(step_)), ", expected ",
                   step_name(static_cast<int>(want)), " (each phase runs once, in order)");
}

Bytes Client::advertise() {
  expect_step(Step::kNew, "advertise()");
  c_ = crypto::generate_keypair();
  s_ = crypto::generate_keypair();
  step_ = Step::kAdvertised;
  return msg::encode_advertise({Phase::kAdvertise, params_.round, id_}, c_.public_key,
                               s_.public_key);
}

// The roster must be this round's, hold this user with the keys it sent, and keys must be
// pairwise distinct (the paper's check: a repeated key would be a replayed identity).
void Client::check_roster(const msg::Roster& r) const {
  const std::string ctx = msg::context(params_.round, Phase::kRoster, id_);
  COHORT_CHECK_ARG(
      r.threshold == static_cast<uint32_t>(params_.threshold) && r.length == params_.length, ctx,
      "roster is for threshold ", r.threshold, " and length ", r.length, ", expected ",
      params_.threshold, " and ", params_.length);
  auto self = std::find_if(r.users.begin(), r.users.end(),
                           [this](const msg::UserKeys& u) { return u.id == id_; });
  COHORT_CHECK_ARG(
      self != r.users.end() && self->c_pk == c_.public_key && self->s_pk == s_.public_key, ctx,
      "the roster does not list this user with the keys it advertised");
  std::set<crypto::Key> keys;
  for (const msg::UserKeys& u : r.users)
    COHORT_CHECK_ARG(keys.insert(u.c_pk).second && keys.insert(u.s_pk).second, ctx, "user ", u.id,
                     " has a public key that appears twice in the roster");
  if (r.users.size() < static_cast<size_t>(params_.threshold))
    throw TooFewUsers(params_.round, msg::phase_name(Phase::kAdvertise), r.users.size(),
                      params_.threshold);
}

crypto::Key Client::pair_key(const crypto::Key& secret, const crypto::Key& peer, const char* label,
                             uint32_t peer_id, Phase phase) const {
  crypto::Key shared;
  COHORT_CHECK_ARG(crypto::agree(secret, peer, shared), msg::context(params_.round, phase, id_),
                   "the public key of user ", peer_id, " is not a usable X25519 key");
  crypto::Key k = crypto::hkdf(shared, label, params_.round);
  crypto::wipe(shared);
  return k;
}

Bytes Client::share_keys(const Bytes& roster_bytes) {
  expect_step(Step::kAdvertised, "share_keys()");
  msg::Roster r = msg::decode_roster(roster_bytes, {Phase::kRoster, params_.round, msg::kEveryone});
  check_roster(r);
  for (const msg::UserKeys& u : r.users) roster_[u.id] = u;
  b_ = crypto::random_key();
  const int n = static_cast<int>(r.users.size());
  auto s_shares = shamir::split(s_.secret, params_.threshold, n);
  auto b_shares = shamir::split(b_, params_.threshold, n);
  std::vector<msg::Sealed> out;
  for (int i = 0; i < n; ++i) {  // share i (x = i + 1) goes to roster entry i
    const msg::UserKeys& v = r.users[i];
    if (v.id == id_) {
      held_[id_] = {s_shares[i].y, b_shares[i].y};
      continue;
    }
    crypto::Key key = pair_key(c_.secret, v.c_pk, kShareLabel, v.id, Phase::kShares);
    Bytes plain = msg::encode_share_plain({id_, v.id, s_shares[i].y, b_shares[i].y});
    out.push_back({v.id, crypto::seal(key, msg::share_aad(params_.round, id_, v.id), plain)});
    crypto::wipe(plain);
    crypto::wipe(key);
  }
  step_ = Step::kShared;
  return msg::encode_sealed({Phase::kShares, params_.round, id_}, out);
}

// Decrypts the shares other users sealed to this one; their senders, with this user, are U2.
void Client::open_shares(const Bytes& shares_for_me) {
  const msg::Header h{Phase::kSharesFor, params_.round, id_};
  const std::string ctx = msg::context(h.round, h.phase, h.user);
  // Into a local map first: a refused message leaves this user as it was.
  std::map<uint32_t, Held> got{{id_, held_.at(id_)}};
  for (const msg::Sealed& s : msg::decode_sealed(shares_for_me, h)) {
    auto from = roster_.find(s.peer);
    COHORT_CHECK_ARG(from != roster_.end() && s.peer != id_, ctx, "a share from user ", s.peer,
                     ", who is not another member of the roster");
    COHORT_CHECK_ARG(!got.count(s.peer), ctx, "two shares from user ", s.peer);
    crypto::Key key = pair_key(c_.secret, from->second.c_pk, kShareLabel, s.peer, h.phase);
    Bytes plain;
    const bool ok = crypto::open(key, msg::share_aad(params_.round, s.peer, id_), s.bytes, plain);
    crypto::wipe(key);
    COHORT_CHECK_ARG(ok, ctx, "the share from user ", s.peer,
                     " does not decrypt (wrong key or round, or altered in transit)");
    msg::SharePlain p = msg::decode_share_plain(plain, h);
    crypto::wipe(plain);
    COHORT_CHECK_ARG(p.from == s.peer && p.to == id_, ctx, "the share from user ", s.peer,
                     " names sender ", p.from, " and recipient ", p.to);
    got[s.peer] = {std::move(p.s_share), std::move(p.b_share)};
  }
  if (got.size() < static_cast<size_t>(params_.threshold))
    throw TooFewUsers(params_.round, msg::phase_name(Phase::kShares), got.size(),
                      params_.threshold);
  held_ = std::move(got);
}

Bytes Client::masked_input(std::span<const uint64_t> x, const Bytes& shares_for_me) {
  expect_step(Step::kShared, "masked_input()");
  COHORT_CHECK_ARG(x.size() == params_.length, msg::context(params_.round, Phase::kMasked, id_),
                   "input of length ", x.size(), ", expected ", params_.length);
  open_shares(shares_for_me);
  std::vector<uint64_t> y(x.begin(), x.end());
  crypto::add_prg(b_, crypto::Sign::kAdd, y);
  for (const auto& [v, held] : held_) {  // held_'s owners are exactly U2
    if (v == id_) continue;
    crypto::Key seed = pair_key(s_.secret, roster_.at(v).s_pk, kMaskLabel, v, Phase::kMasked);
    crypto::add_prg(seed, v > id_ ? crypto::Sign::kAdd : crypto::Sign::kSubtract, y);
    crypto::wipe(seed);
  }
  step_ = Step::kMasked;
  return msg::encode_masked({Phase::kMasked, params_.round, id_}, y);
}

Bytes Client::unmask(const Bytes& survivors_bytes) {
  expect_step(Step::kMasked, "unmask()");
  const msg::Header h{Phase::kSurvivors, params_.round, msg::kEveryone};
  const std::string ctx = msg::context(params_.round, Phase::kUnmask, id_);
  msg::Survivors s = msg::decode_survivors(survivors_bytes, h);
  std::set<uint32_t> alive(s.survivors.begin(), s.survivors.end());
  std::set<uint32_t> dropped(s.dropped.begin(), s.dropped.end());
  COHORT_CHECK_ARG(alive.size() == s.survivors.size() && dropped.size() == s.dropped.size(), ctx,
                   "the survivors message repeats a user id");
  // The safety check: shares of both b_v and s_v^SK would let the server unmask x_v alone.
  for (uint32_t v : alive)
    COHORT_CHECK_ARG(!dropped.count(v), ctx, "refused: user ", v,
                     " is listed both as surviving and as dropped; answering would reveal "
                     "its input");
  COHORT_CHECK_ARG(alive.count(id_), ctx, "this user is not listed among the survivors");
  for (const auto* list : {&s.survivors, &s.dropped})
    for (uint32_t v : *list)
      COHORT_CHECK_ARG(held_.count(v), ctx, "user ", v, " is not in U2 (sent no shares)");
  COHORT_CHECK_ARG(alive.size() + dropped.size() == held_.size(), ctx, "survivors and dropped ",
                   "list ", alive.size() + dropped.size(), " users, U2 has ", held_.size());
  if (alive.size() < static_cast<size_t>(params_.threshold))
    throw TooFewUsers(params_.round, msg::phase_name(Phase::kMasked), alive.size(),
                      params_.threshold);
  std::vector<msg::UnmaskEntry> out;
  for (const auto& [v, held] : held_) {
    if (alive.count(v))
      out.push_back({v, msg::ShareKind::kSelfMask, held.b_share});
    else
      out.push_back({v, msg::ShareKind::kMaskKey, held.s_share});
  }
  step_ = Step::kDone;
  wipe_secrets();
  held_.clear();
  return msg::encode_unmask({Phase::kUnmask, params_.round, id_}, out);
}

}  // namespace cohort::federated::secagg
