// CHOCO-Gossip (parallel/decentralized/choco_gossip.h) with workers simulated in one process, no
// training: the copies every worker keeps of a neighbour agree bit for bit with that neighbour's
// own, the average of the workers is kept, and the workers converge to it through a lossy codec.
#include "cohort/parallel/decentralized/choco_gossip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cohort/core/error.h"
#include "cohort/parallel/decentralized/gossip_topology.h"

namespace cohort::parallel {
namespace {

using compress::Method;

struct Worker {
  std::vector<float> x;
  GossipPeers peers;
  std::unique_ptr<ChocoGossip> choco;
};

std::vector<Worker> ring(int n, size_t numel, const ChocoOptions& o) {  // random x, zero copies
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<Worker> w(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    w[r].x.resize(numel);
    for (float& v : w[r].x) v = d(gen);
    w[r].peers = gossip_peers(GossipTopology::kRing, r, n);
    w[r].choco = std::make_unique<ChocoGossip>(o, numel, w[r].peers.neighbours.size());
    w[r].choco->reset({});  // the paper's start: zeros everywhere
  }
  return w;
}

// One round: every worker encodes, the messages are "sent", then each updates and pulls.
void round(std::vector<Worker>& w, uint64_t t) {
  std::vector<std::vector<uint8_t>> sent;
  for (auto& k : w) {
    auto m = k.choco->encode(k.x, t);
    sent.emplace_back(m.begin(), m.end());
  }
  for (auto& k : w) {
    for (size_t j = 0; j < k.peers.neighbours.size(); ++j) {
      const auto& m = sent[size_t(k.peers.neighbours[j])];
      std::copy(m.begin(), m.end(), k.choco->inbox(j).begin());
    }
  }
  for (auto& k : w) {
    k.choco->update(t);
    k.choco->pull(k.x, 0, k.peers.weight);
  }
}

std::vector<double> mean(const std::vector<Worker>& w) {
  std::vector<double> m(w[0].x.size());
  for (const auto& k : w)
    for (size_t i = 0; i < m.size(); ++i) m[i] += k.x[i] / double(w.size());
  return m;
}

double distance(const std::vector<Worker>& w) {  // sqrt(mean_i |x_i - mean|^2)
  const std::vector<double> m = mean(w);
  double sq = 0;
  for (const auto& k : w)
    for (size_t i = 0; i < m.size(); ++i) sq += (k.x[i] - m[i]) * (k.x[i] - m[i]);
  return std::sqrt(sq / double(w.size()));
}

void expect_converges(const ChocoOptions& o, int rounds, double factor, int workers = 6) {
  std::vector<Worker> w = ring(workers, 1000, o);
  const std::vector<double> m0 = mean(w);
  const double d0 = distance(w);
  for (int t = 0; t < rounds; ++t) round(w, uint64_t(t));
  const std::string what = detail::str(compress::method_name(o.codec.method), " ratio ",
                                       o.codec.ratio, " gamma ", o.gamma, " on ", workers);
  EXPECT_LT(distance(w), d0 * factor) << what;
  const std::vector<double> m1 = mean(w);
  for (size_t i = 0; i < m0.size(); ++i) ASSERT_NEAR(m1[i], m0[i], 1e-4) << what << " at " << i;
  // Each neighbour's copy of worker r is worker r's own copy, exactly.
  for (size_t r = 0; r < w.size(); ++r) {
    for (size_t j = 0; j < w[r].peers.neighbours.size(); ++j) {
      const size_t n = size_t(w[r].peers.neighbours[j]);
      EXPECT_EQ(w[r].choco->peer(j), w[n].choco->self()) << what << ": " << r << " of " << n;
    }
  }
}

TEST(ChocoGossip, Fp16KeepsTheAverageAndConverges) {
  expect_converges({.codec = {.method = Method::kFp16}, .gamma = 1.0}, 100, 1e-3);
}

// gamma matters with sparse codecs: on this ring, top-k 10% diverges at 0.5 and randomk
// (10%) already at 0.1 (measured); CHOCO's analysis asks for a gamma that shrinks with the codec's
// share.
TEST(ChocoGossip, TopKTenPercentKeepsTheAverageAndConverges) {
  expect_converges({.codec = {.method = Method::kTopK, .ratio = 0.1}, .gamma = 0.2}, 200, 1e-3);
}

TEST(ChocoGossip, QsgdAndRandomKConvergeToo) {
  expect_converges({.codec = {.method = Method::kQsgd, .levels = 16}, .gamma = 0.5}, 200, 1e-2);
  expect_converges({.codec = {.method = Method::kRandomK, .ratio = 0.2, .seed = 3}, .gamma = 0.05},
                   400, 1e-2);
}

// gossip.consensus_step = 0 picks gamma by codec: it must converge on small and larger rings.
TEST(ChocoGossip, TheDefaultConsensusStepOfEveryCodecConverges) {
  for (Method m : {Method::kFp16, Method::kBf16, Method::kTopK, Method::kRandomK, Method::kQsgd,
                   Method::kSign}) {
    for (double ratio : {0.01, 0.1}) {
      if (ratio == 0.01 && m == Method::kRandomK) continue;  // converges, but too slowly here
      const compress::CompressorOptions c{.method = m, .ratio = ratio, .seed = 5, .levels = 16};
      for (int workers : {4, 8})
        expect_converges({.codec = c, .gamma = default_consensus_step(c)}, 1000, 0.1, workers);
    }
  }
}

TEST(ChocoGossip, AConsensusStepOutsideZeroToOneIsAnErrorNamingTheKey) {
  for (double gamma : {0.0, 1.5}) {
    try {
      ChocoGossip({.codec = {.method = Method::kFp16}, .gamma = gamma}, 10, 2);
      FAIL() << gamma;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("gossip.consensus_step"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cohort::parallel
