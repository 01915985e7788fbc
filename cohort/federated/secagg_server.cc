// The server's side of secure aggregation (secagg.h): collects each phase, relays the sealed
// shares, and removes the masks at the end.
#include <algorithm>

#include "cohort/federated/secagg.h"

namespace cohort::federated::secagg {
namespace {

using msg::Phase;

const char* step_phase(int step) {
  static const Phase kPhases[] = {Phase::kAdvertise, Phase::kShares, Phase::kMasked,
                                  Phase::kUnmask};
  return msg::phase_name(kPhases[step]);
}

void check_enough(const Params& p, Phase phase, size_t left) {
  if (left < static_cast<size_t>(p.threshold))
    throw TooFewUsers(p.round, msg::phase_name(phase), left, p.threshold);
}

}  // namespace

Server::Server(Params params) : params_(params) {
  COHORT_CHECK_ARG(params.threshold >= 2, "secagg server: threshold ", params.threshold,
                   " must be >= 2");
  COHORT_CHECK_ARG(params.length > 0, "secagg server: vector length must be > 0");
}

void Server::expect_step(Step want, Phase phase, uint32_t id) const {
  COHORT_CHECK_ARG(step_ == want, msg::context(params_.round, phase, id),
                   "message arrived while the server is in phase ",
                   step_phase(static_cast<int>(step_)), " (its phase is closed or not open)");
}

void Server::add_advertise(uint32_t id, const Bytes& m) {
  expect_step(Step::kAdvertise, Phase::kAdvertise, id);
  const std::string ctx = msg::context(params_.round, Phase::kAdvertise, id);
  COHORT_CHECK_ARG(id != msg::kEveryone, ctx, "user id ", id, " is reserved");
  COHORT_CHECK_ARG(!roster_.count(id), ctx, "a second advertisement from this user (replay)");
  msg::UserKeys keys = msg::decode_advertise(m, {Phase::kAdvertise, params_.round, id});
  // A small-order point gives an all-zero agreement: refuse it now, naming its owner, rather
  // than have every other user fail on it later.
  crypto::Key probe = crypto::random_key(), shared;
  for (const crypto::Key* k : {&keys.c_pk, &keys.s_pk})
    COHORT_CHECK_ARG(crypto::agree(probe, *k, shared), ctx,
                     "a public key that is not a usable X25519 key");
  crypto::wipe(probe);
  roster_[id] = keys;
}

Bytes Server::roster() {
  if (step_ == Step::kAdvertise) {
    check_enough(params_, Phase::kAdvertise, roster_.size());
    msg::Roster r{static_cast<uint32_t>(params_.threshold), params_.length, {}};
    for (const auto& [id, keys] : roster_) {
      index_[id] = r.users.size();
      r.users.push_back(keys);
    }
    roster_bytes_ = msg::encode_roster({Phase::kRoster, params_.round, msg::kEveryone}, r);
    step_ = Step::kShares;
  }
  return roster_bytes_;
}

void Server::add_shares(uint32_t id, const Bytes& m) {
  expect_step(Step::kShares, Phase::kShares, id);
  const std::string ctx = msg::context(params_.round, Phase::kShares, id);
  COHORT_CHECK_ARG(roster_.count(id), ctx, "unknown user: not in this round's roster");
  COHORT_CHECK_ARG(!sent_shares_.count(id), ctx, "a second ShareKeys message (replay)");
  std::vector<msg::Sealed> list = msg::decode_sealed(m, {Phase::kShares, params_.round, id});
  COHORT_CHECK_ARG(list.size() == roster_.size() - 1, ctx, list.size(),
                   " sealed shares, expected one for each of the other ", roster_.size() - 1,
                   " roster members");
  std::set<uint32_t> to;
  for (const msg::Sealed& s : list)
    COHORT_CHECK_ARG(s.peer != id && roster_.count(s.peer) && to.insert(s.peer).second, ctx,
                     "a share addressed to user ", s.peer,
                     ", who is this user, not in the roster, or addressed twice");
  sent_shares_[id] = std::move(list);
}

void Server::close_shares() {
  COHORT_CHECK_ARG(step_ == Step::kShares, "secagg round ", params_.round,
                   ": close_shares() called in phase ", step_phase(static_cast<int>(step_)));
  check_enough(params_, Phase::kShares, sent_shares_.size());
  for (const auto& [id, list] : sent_shares_) u2_.insert(id);
  // Sort the sealed shares by recipient once; those to users outside U2 are dropped here,
  // and each inbox holds exactly one share from every other member of U2.
  for (auto& [from, list] : sent_shares_)
    for (msg::Sealed& s : list)
      if (u2_.count(s.peer)) inbox_[s.peer].push_back({from, std::move(s.bytes)});
  sent_shares_.clear();
  masked_sum_.assign(params_.length, 0);
  step_ = Step::kMasked;
}

Bytes Server::shares_for(uint32_t id) {
  const std::string ctx = msg::context(params_.round, Phase::kSharesFor, id);
  COHORT_CHECK_ARG(step_ != Step::kAdvertise && step_ != Step::kShares, ctx,
                   "shares_for() before close_shares()");
  COHORT_CHECK_ARG(u2_.count(id), ctx, "this user sent no shares: it is not in U2");
  return msg::encode_sealed({Phase::kSharesFor, params_.round, id}, inbox_[id]);
}

void Server::add_masked(uint32_t id, const Bytes& m) {
  expect_step(Step::kMasked, Phase::kMasked, id);
  const std::string ctx = msg::context(params_.round, Phase::kMasked, id);
  COHORT_CHECK_ARG(u2_.count(id), ctx, "unknown user: not in U2 (sent no shares)");
  COHORT_CHECK_ARG(!u3_.count(id), ctx, "a second masked input (replay)");
  std::vector<uint64_t> y =
      msg::decode_masked(m, {Phase::kMasked, params_.round, id}, params_.length);
  for (size_t i = 0; i < y.size(); ++i) masked_sum_[i] += y[i];  // wraps: Z_2^64
  u3_.insert(id);
}

Bytes Server::survivors() {
  if (step_ == Step::kMasked) {
    check_enough(params_, Phase::kMasked, u3_.size());
    msg::Survivors s{{u3_.begin(), u3_.end()}, {}};
    std::set_difference(u2_.begin(), u2_.end(), u3_.begin(), u3_.end(),
                        std::back_inserter(s.dropped));
    survivors_bytes_ = msg::encode_survivors({Phase::kSurvivors, params_.round, msg::kEveryone}, s);
    step_ = Step::kUnmask;
  }
  COHORT_CHECK_ARG(step_ == Step::kUnmask, "secagg round ", params_.round,
                   ": survivors() called in phase ", step_phase(static_cast<int>(step_)));
  return survivors_bytes_;
}

std::vector<uint32_t> Server::contributors() const {
  COHORT_CHECK_ARG(step_ == Step::kUnmask, "secagg round ", params_.round,
                   ": contributors() before survivors() closed phase ",
                   msg::phase_name(Phase::kMasked));
  return {u3_.begin(), u3_.end()};
}

// An answer must hold exactly one share per member of U2: of b_v for v in U3, of s_v^SK for
// v dropped. Anything else is a confused or lying client, refused as a whole.
void Server::check_unmask(uint32_t id, const std::vector<msg::UnmaskEntry>& entries) const {
  const std::string ctx = msg::context(params_.round, Phase::kUnmask, id);
  COHORT_CHECK_ARG(entries.size() == u2_.size(), ctx, entries.size(),
                   " shares, expected one for each of the ", u2_.size(), " users in U2");
  std::set<uint32_t> seen;
  for (const msg::UnmaskEntry& e : entries) {
    COHORT_CHECK_ARG(u2_.count(e.owner) && seen.insert(e.owner).second, ctx, "a share for user ",
                     e.owner, ", who is not in U2 or appears twice");
    const auto want = u3_.count(e.owner) ? msg::ShareKind::kSelfMask : msg::ShareKind::kMaskKey;
    COHORT_CHECK_ARG(e.kind == want, ctx, "a share of the wrong secret for user ", e.owner,
                     ": expected its ",
                     want == msg::ShareKind::kSelfMask ? "self-mask seed b" : "mask key s_SK");
  }
}

void Server::add_unmask(uint32_t id, const Bytes& m) {
  expect_step(Step::kUnmask, Phase::kUnmask, id);
  const std::string ctx = msg::context(params_.round, Phase::kUnmask, id);
  COHORT_CHECK_ARG(u3_.count(id), ctx, "unknown user: not among the survivors U3");
  COHORT_CHECK_ARG(!unmasks_.count(id), ctx, "a second unmask answer (replay)");
  std::vector<msg::UnmaskEntry> entries =
      msg::decode_unmask(m, {Phase::kUnmask, params_.round, id});
  check_unmask(id, entries);
  auto& mine = unmasks_[id];
  for (msg::UnmaskEntry& e : entries) mine[e.owner] = std::move(e.y);
}

// The secret of `owner` (b or s^SK: which one the answers hold) from every answer's share.
crypto::Key Server::rebuild(uint32_t owner) const {
  std::vector<shamir::Share> shares;
  for (const auto& [responder, by_owner] : unmasks_)
    shares.push_back({static_cast<uint32_t>(index_.at(responder) + 1), by_owner.at(owner)});
  std::vector<uint8_t> secret = shamir::combine(shares, msg::kSecretBytes);
  crypto::Key k;
  std::copy(secret.begin(), secret.end(), k.begin());
  crypto::wipe(secret);
  return k;
}

// y_u of each survivor u holds +p_uv (v > u) or -p_uv (v < u) for the dropped v, with no
// partner term to cancel it: rebuild s_v^SK, recompute p_uv and take it back out.
void Server::remove_dropped_masks(uint32_t v, std::vector<uint64_t>& sum) const {
  crypto::Key sk = rebuild(v);
  COHORT_CHECK_ARG(crypto::public_of(sk) == roster_.at(v).s_pk,
                   msg::context(params_.round, Phase::kUnmask, v),
                   "the mask key rebuilt for this dropped user does not match the key it "
                   "advertised: some unmask answer holds a corrupt share");
  for (uint32_t u : u3_) {
    crypto::Key shared, seed;
    COHORT_INTERNAL(crypto::agree(sk, roster_.at(u).s_pk, shared), "agreement with user ", u);
    seed = crypto::hkdf(shared, msg::kMaskLabel, params_.round);
    crypto::add_prg(seed, v > u ? crypto::Sign::kSubtract : crypto::Sign::kAdd, sum);
    crypto::wipe(shared);
    crypto::wipe(seed);
  }
  crypto::wipe(sk);
}

std::vector<uint64_t> Server::aggregate() {
  COHORT_CHECK_ARG(step_ == Step::kUnmask, "secagg round ", params_.round,
                   ": aggregate() called in phase ", step_phase(static_cast<int>(step_)),
                   ", expected after survivors()");
  check_enough(params_, Phase::kUnmask, unmasks_.size());
  std::vector<uint64_t> sum = masked_sum_;
  for (uint32_t u : u3_) {
    crypto::Key b = rebuild(u);
    crypto::add_prg(b, crypto::Sign::kSubtract, sum);
    crypto::wipe(b);
  }
  for (uint32_t v : u2_)
    if (!u3_.count(v)) remove_dropped_masks(v, sum);
  return sum;
}

}  // namespace cohort::federated::secagg
