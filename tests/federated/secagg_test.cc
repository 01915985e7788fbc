// Secure aggregation (cohort/federated/secagg.h), whole rounds in process: the sum is exact in
// Z_2^64 with and without dropouts, what the server receives reveals no input or strict subset
// sum, the client's safety check holds, and bad messages are typed errors naming the user.
#include "cohort/federated/secagg.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <set>

namespace cohort::federated::secagg {
namespace {

using Vec = std::vector<uint64_t>;
using Clock = std::chrono::steady_clock;

// One round, with the integrator's part played here: every byte the server is given passes
// through this object, and the masked vectors are kept (decoded) as the server saw them.
struct Round {
  Params params;
  Server server;
  std::vector<Client> clients;
  std::vector<Vec> x;                   // x[i] is client i's input
  std::map<uint32_t, Vec> seen_masked;  // y_u as received by the server
  std::map<uint32_t, size_t> index;     // id -> i
  double seconds[4] = {0, 0, 0, 0};     // per phase, clients and server together

  Round(int n, int t, size_t length, uint64_t round = 7)
      : params{round, t, length}, server(params) {
    std::mt19937_64 rng(round * 1000 + n);
    for (int i = 0; i < n; ++i) {
      const uint32_t id = 100 + 7 * static_cast<uint32_t>(i);  // sparse ids, not indexes
      clients.emplace_back(id, params);
      index[id] = i;
      Vec v(length);
      for (auto& e : v) e = rng();
      x.push_back(std::move(v));
    }
  }
  uint32_t id(int i) const { return clients[i].id(); }

  // Runs phases 0-2; the clients in `skip_shares` go silent before ShareKeys, those in
  // `skip_masked` before MaskedInput.
  void run_until_unmask(const std::set<int>& skip_shares = {},
                        const std::set<int>& skip_masked = {}) {
    auto t0 = Clock::now();
    for (auto& c : clients) server.add_advertise(c.id(), c.advertise());
    const Bytes roster = server.roster();
    auto t1 = Clock::now();
    for (size_t i = 0; i < clients.size(); ++i)
      if (!skip_shares.count(i)) server.add_shares(id(i), clients[i].share_keys(roster));
    server.close_shares();
    auto t2 = Clock::now();
    for (size_t i = 0; i < clients.size(); ++i) {
      if (skip_shares.count(i) || skip_masked.count(i)) continue;
      Bytes m = clients[i].masked_input(x[i], server.shares_for(id(i)));
      seen_masked[id(i)] =
          msg::decode_masked(m, {msg::Phase::kMasked, params.round, id(i)}, params.length);
      server.add_masked(id(i), m);
    }
    auto t3 = Clock::now();
    seconds[0] += std::chrono::duration<double>(t1 - t0).count();
    seconds[1] += std::chrono::duration<double>(t2 - t1).count();
    seconds[2] += std::chrono::duration<double>(t3 - t2).count();
  }

  // Phase 3: the survivors not in `silent` answer; returns the server's aggregate.
  Vec unmask_and_aggregate(const std::set<int>& silent = {}) {
    auto t0 = Clock::now();
    const Bytes survivors = server.survivors();
    for (uint32_t u : server.contributors())
      if (!silent.count(index.at(u))) server.add_unmask(u, clients[index.at(u)].unmask(survivors));
    Vec z = server.aggregate();
    seconds[3] += std::chrono::duration<double>(Clock::now() - t0).count();
    return z;
  }

  Vec plain_sum(const std::vector<uint32_t>& ids) const {
    Vec s(params.length, 0);
    for (uint32_t u : ids)
      for (size_t k = 0; k < s.size(); ++k) s[k] += x[index.at(u)][k];
    return s;
  }
};

Vec sum_of(const std::vector<const Vec*>& vs) {
  Vec s(vs.front()->size(), 0);
  for (const Vec* v : vs)
    for (size_t k = 0; k < s.size(); ++k) s[k] += (*v)[k];
  return s;
}

// How many positions two vectors share: two independent uniform uint64 vectors of 1000 share
// none but with probability ~2^-54.
size_t coincidences(const Vec& a, const Vec& b) {
  size_t n = 0;
  for (size_t k = 0; k < a.size(); ++k) n += a[k] == b[k];
  return n;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument thrown)";
}

TEST(SecAgg, FullRoundSumsExactly) {
  Round r(10, 6, 1000);
  r.run_until_unmask();
  Vec z = r.unmask_and_aggregate();
  std::vector<uint32_t> all;
  for (int i = 0; i < 10; ++i) all.push_back(r.id(i));
  EXPECT_EQ(r.server.contributors(), all);
  EXPECT_EQ(z, r.plain_sum(all));
}

TEST(SecAgg, TheServerSeesNoInputAndNoStrictSubsetSum) {
  Round r(10, 6, 1000);
  r.run_until_unmask();
  for (const auto& [u, y] : r.seen_masked)
    for (const Vec& xv : r.x) ASSERT_EQ(coincidences(y, xv), 0u) << "y of user " << u;
  // Every non-empty subset of four chosen users, and every "all but one" set.
  std::vector<std::vector<uint32_t>> subsets;
  const int chosen[4] = {0, 3, 5, 9};
  for (int mask = 1; mask < 16; ++mask) {
    std::vector<uint32_t> s;
    for (int j = 0; j < 4; ++j)
      if (mask & (1 << j)) s.push_back(r.id(chosen[j]));
    subsets.push_back(s);
  }
  for (int out = 0; out < 10; ++out) {
    std::vector<uint32_t> s;
    for (int i = 0; i < 10; ++i)
      if (i != out) s.push_back(r.id(i));
    subsets.push_back(s);
  }
  for (const auto& s : subsets) {
    std::vector<const Vec*> ys;
    for (uint32_t u : s) ys.push_back(&r.seen_masked.at(u));
    ASSERT_EQ(coincidences(sum_of(ys), r.plain_sum(s)), 0u) << s.size() << " users";
  }
  // Even the whole set's masked sum still carries the self masks: only unmasking gives z.
  std::vector<const Vec*> every;
  std::vector<uint32_t> ids;
  for (const auto& [u, y] : r.seen_masked) every.push_back(&y), ids.push_back(u);
  EXPECT_EQ(coincidences(sum_of(every), r.plain_sum(ids)), 0u);
  EXPECT_EQ(r.unmask_and_aggregate(), r.plain_sum(ids));
}

TEST(SecAgg, ThreeDropoutsAfterShareKeysStillSumTheSurvivorsExactly) {
  Round r(10, 6, 1000);
  r.run_until_unmask({}, {1, 4, 8});
  std::vector<uint32_t> alive;
  for (int i = 0; i < 10; ++i)
    if (i != 1 && i != 4 && i != 8) alive.push_back(r.id(i));
  EXPECT_EQ(r.unmask_and_aggregate(), r.plain_sum(alive));
  EXPECT_EQ(r.server.contributors(), alive);
}

TEST(SecAgg, DropoutsInEveryPhaseStillSumExactly) {
  Round r(10, 6, 1000);
  r.run_until_unmask({2}, {0, 7});  // 2 never shares; 0 and 7 share but send no input
  std::vector<uint32_t> alive;
  for (int i : {1, 3, 4, 5, 6, 8, 9}) alive.push_back(r.id(i));
  // One survivor does not answer the unmask request: 6 answers = t remain.
  EXPECT_EQ(r.unmask_and_aggregate({3}), r.plain_sum(alive));
}

TEST(SecAgg, TooManyDropoutsAreATypedErrorNamingThePhase) {
  Round r(10, 6, 100);
  r.run_until_unmask({}, {0, 1, 2, 3, 4});
  try {
    r.server.survivors();
    FAIL() << "5 of 10 survivors with t = 6 must not finish";
  } catch (const TooFewUsers& e) {
    EXPECT_EQ(e.phase(), "MaskedInput");
    EXPECT_EQ(e.left(), 5u);
    EXPECT_EQ(e.threshold(), 6);
    EXPECT_NE(std::string(e.what()).find("only 5 users left"), std::string::npos) << e.what();
  }
  Round few(5, 6, 10);  // fewer advertise than t
  for (auto& c : few.clients) few.server.add_advertise(c.id(), c.advertise());
  EXPECT_THROW(few.server.roster(), TooFewUsers);
  Round quiet(10, 6, 100);  // too few unmask answers
  quiet.run_until_unmask({}, {0, 1});
  EXPECT_THROW(quiet.unmask_and_aggregate({2, 3, 4}), TooFewUsers);
  EXPECT_THROW(quiet.server.aggregate(), IoError);  // TooFewUsers is an IoError: retry
}

TEST(SecAgg, AClientRefusesToRevealBothSecretsOfOneUser) {
  Round r(7, 4, 50);
  r.run_until_unmask({}, {6});
  const Bytes honest = r.server.survivors();
  msg::Survivors s;
  for (uint32_t u : r.server.contributors()) s.survivors.push_back(u);
  s.dropped = {r.id(6), r.id(2)};  // 2 survived: listed on both sides
  const Bytes evil = msg::encode_survivors({msg::Phase::kSurvivors, 7, msg::kEveryone}, s);
  std::string err = error_of([&] { r.clients[0].unmask(evil); });
  EXPECT_NE(err.find("both as surviving and as dropped"), std::string::npos) << err;
  EXPECT_NE(err.find("user " + std::to_string(r.id(2))), std::string::npos) << err;
  // The honest request still works after the refusal, and only once.
  r.clients[0].unmask(honest);
  EXPECT_THROW(r.clients[0].unmask(honest), InvalidArgument);
  // A request that hides a dropped user (U3 and dropped not covering U2) is refused too.
  Round r2(7, 4, 50);
  r2.run_until_unmask({}, {6});
  r2.server.survivors();
  msg::Survivors partial{{}, {}};
  for (uint32_t u : r2.server.contributors()) partial.survivors.push_back(u);
  const Bytes hiding = msg::encode_survivors({msg::Phase::kSurvivors, 7, msg::kEveryone}, partial);
  EXPECT_THROW(r2.clients[0].unmask(hiding), InvalidArgument);
}

TEST(SecAgg, ACorruptUnmaskShareIsDetectedForDroppedKeys) {
  Round r(8, 5, 100);
  r.run_until_unmask({}, {3});
  const Bytes survivors = r.server.survivors();
  const uint32_t u0 = r.id(0);
  Bytes answer = r.clients[0].unmask(survivors);
  auto entries = msg::decode_unmask(answer, {msg::Phase::kUnmask, 7, u0});
  for (auto& e : entries)
    if (e.kind == msg::ShareKind::kMaskKey)  // every chunk: X25519 ignores 3 bits of byte 0
      for (uint64_t& y : e.y) y = shamir::add(y, 12345);
  r.server.add_unmask(u0, msg::encode_unmask({msg::Phase::kUnmask, 7, u0}, entries));
  for (int i : {1, 2, 4, 5}) r.server.add_unmask(r.id(i), r.clients[i].unmask(survivors));
  std::string err = error_of([&] { r.server.aggregate(); });
  EXPECT_NE(err.find("does not match the key it advertised"), std::string::npos) << err;
}

TEST(SecAgg, MalformedAdvertisementsAreRefusedNamingTheUser) {
  Round r(6, 4, 20);
  const uint32_t a = r.id(0), b = r.id(1);
  const Bytes adv = r.clients[0].advertise();
  Bytes cut(adv.begin(), adv.end() - 1), longer = adv;
  longer.push_back(0);
  std::string e1 = error_of([&] { r.server.add_advertise(a, cut); });
  EXPECT_NE(e1.find("user " + std::to_string(a)), std::string::npos) << e1;
  EXPECT_NE(e1.find("AdvertiseKeys"), std::string::npos) << e1;
  EXPECT_NE(e1.find("truncated"), std::string::npos) << e1;
  EXPECT_NE(error_of([&] { r.server.add_advertise(a, longer); }).find("trailing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.server.add_advertise(b, adv); }).find("names user"),
            std::string::npos);  // a's message presented as b's
  Client other_round(a, {8, 4, 20});
  EXPECT_NE(error_of([&] { r.server.add_advertise(a, other_round.advertise()); }).find("round 8"),
            std::string::npos);
  Bytes zero_key = msg::encode_advertise({msg::Phase::kAdvertise, 7, a}, {}, {});
  EXPECT_NE(error_of([&] { r.server.add_advertise(a, zero_key); }).find("usable X25519"),
            std::string::npos);
  for (size_t len = 0; len < adv.size(); ++len)  // every truncation, never a crash
    EXPECT_THROW(r.server.add_advertise(a, Bytes(adv.begin(), adv.begin() + len)), InvalidArgument);
}

TEST(SecAgg, ReplayedWrongPhaseAndTamperedMessagesAreRefused) {
  Round r(6, 4, 20);
  const uint32_t a = r.id(0), b = r.id(1);
  const Bytes adv = r.clients[0].advertise();
  r.server.add_advertise(a, adv);
  EXPECT_NE(error_of([&] { r.server.add_advertise(a, adv); }).find("replay"), std::string::npos);
  for (int i = 1; i < 6; ++i) r.server.add_advertise(r.id(i), r.clients[i].advertise());
  const Bytes roster = r.server.roster();
  EXPECT_THROW(r.server.add_advertise(999, adv), InvalidArgument);  // phase closed
  const Bytes shares = r.clients[0].share_keys(roster);
  EXPECT_NE(error_of([&] { r.server.add_shares(999, shares); }).find("not in this round's roster"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.server.add_shares(a, adv); }).find("expected a ShareKeys"),
            std::string::npos);
  Bytes forged = shares;  // a count of 2^32 - 1 entries must not allocate them
  forged[17] = forged[18] = forged[19] = forged[20] = 0xFF;
  EXPECT_NE(error_of([&] { r.server.add_shares(a, forged); }).find("truncated"), std::string::npos);
  r.server.add_shares(a, shares);
  EXPECT_NE(error_of([&] { r.server.add_shares(a, shares); }).find("replay"), std::string::npos);
  for (int i = 1; i < 6; ++i) r.server.add_shares(r.id(i), r.clients[i].share_keys(roster));
  r.server.close_shares();
  Bytes tampered = r.server.shares_for(b);
  tampered[tampered.size() - 3] ^= 1;
  std::string e2 = error_of([&] { r.clients[1].masked_input(r.x[1], tampered); });
  EXPECT_NE(e2.find("does not decrypt"), std::string::npos) << e2;
  const Bytes y_b = r.clients[1].masked_input(r.x[1], r.server.shares_for(b));
  Vec short_y(19, 0);
  Bytes wrong_len = msg::encode_masked({msg::Phase::kMasked, 7, b}, short_y);
  std::string e3 = error_of([&] { r.server.add_masked(b, wrong_len); });
  EXPECT_NE(e3.find("expected 20"), std::string::npos) << e3;
  r.server.add_masked(b, y_b);
  EXPECT_NE(error_of([&] { r.server.add_masked(b, y_b); }).find("replay"), std::string::npos);
}

TEST(SecAgg, AClientRefusesARosterNotForItsRound) {
  Round r(6, 4, 20);
  for (int i = 1; i < 6; ++i) r.server.add_advertise(r.id(i), r.clients[i].advertise());
  r.clients[0].advertise();
  const Bytes without_me = r.server.roster();  // user 0's advertisement never arrived
  std::string err = error_of([&] { r.clients[0].share_keys(without_me); });
  EXPECT_NE(err.find("user " + std::to_string(r.id(0))), std::string::npos) << err;
  EXPECT_NE(err.find("keys it advertised"), std::string::npos) << err;
  Client late(r.id(0), {8, 4, 20});  // a client of round 8 given round 7's roster
  late.advertise();
  EXPECT_NE(error_of([&] { late.share_keys(without_me); }).find("round 7, expected round 8"),
            std::string::npos);
  Client early(r.id(0), {7, 4, 20});  // phases out of order
  EXPECT_NE(error_of([&] { early.share_keys(without_me); }).find("before advertise()"),
            std::string::npos);
}

TEST(SecAgg, CostPerPhaseAtLength100k) {
  Round r(10, 6, 100000);
  r.run_until_unmask({}, {2, 5});  // two dropouts, so the server rebuilds their masks too
  std::vector<uint32_t> alive;
  for (int i = 0; i < 10; ++i)
    if (i != 2 && i != 5) alive.push_back(r.id(i));
  EXPECT_EQ(r.unmask_and_aggregate(), r.plain_sum(alive));
  std::printf(
      "secagg n=10 t=6 length=100000, 2 dropped: advertise %.1f ms, share keys %.1f ms, "
      "masked input %.1f ms, unmask+aggregate %.1f ms (all users and server, 1 thread)\n",
      r.seconds[0] * 1e3, r.seconds[1] * 1e3, r.seconds[2] * 1e3, r.seconds[3] * 1e3);
}

}  // namespace
}  // namespace cohort::federated::secagg
