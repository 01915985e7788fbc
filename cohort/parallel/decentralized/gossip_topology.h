#pragma once
// The communication graphs of decentralized (gossip) SGD (Lian et al., D-PSGD, NeurIPS 2017):
// which ranks each rank averages its parameters with, and the weights of that average. Every
// graph here is undirected and regular (every rank has the same number of neighbours), so
// uniform weights 1 / (degree + 1), self included, make the mixing matrix symmetric and doubly
// stochastic: repeated mixing converges to the plain average of all ranks.
//
//   ring:        r - 1 and r + 1 (mod N)
//   exponential: r ± 2^k (mod N) for 2^k < N (Assran et al.'s SGP graph, made symmetric)
//   torus:       the 4 neighbours on a rows x cols grid that wraps around (rows * cols = N,
//                rows the largest divisor of N not above sqrt(N); N prime makes it a ring)
//
// Duplicates collapse (a ring of 2: one neighbour; of 1: none), keeping every graph regular.
#include <string>
#include <vector>

namespace cohort::parallel {

enum class GossipTopology { kRing, kExponential, kTorus };

// "ring" | "exponential" | "torus"; InvalidArgument naming gossip.topology otherwise.
GossipTopology parse_gossip_topology(const std::string& name);

struct GossipPeers {
  std::vector<int> neighbours;  // ascending, without `rank`
  double weight = 1.0;          // of each neighbour and of self: 1 / (neighbours + 1)
};

GossipPeers gossip_peers(GossipTopology t, int rank, int world);

}  // namespace cohort::parallel
