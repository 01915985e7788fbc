#include "cohort/parallel/decentralized/gossip_topology.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "cohort/core/error.h"

namespace cohort::parallel {

GossipTopology parse_gossip_topology(const std::string& name) {
  if (name == "ring") return GossipTopology::kRing;
  if (name == "exponential") return GossipTopology::kExponential;
  if (name == "torus") return GossipTopology::kTorus;
  throw InvalidArgument(
      detail::str("gossip.topology = '", name, "': expected 'ring', 'exponential' or 'torus'"));
}

namespace {

int wrap(int r, int n) {
  return ((r % n) + n) % n;
}

std::set<int> torus(int rank, int world) {
  int rows = int(std::sqrt(double(world)));
  while (world % rows != 0) --rows;
  const int cols = world / rows;
  const int row = rank / cols, col = rank % cols;
  auto at = [&](int r, int c) { return wrap(r, rows) * cols + wrap(c, cols); };
  return {at(row - 1, col), at(row + 1, col), at(row, col - 1), at(row, col + 1)};
}

}  // namespace

GossipPeers gossip_peers(GossipTopology t, int rank, int world) {
  COHORT_CHECK_ARG(world >= 1 && rank >= 0 && rank < world, "gossip: rank ", rank,
                   " out of range for ", world, " workers");
  std::set<int> peers;
  if (t == GossipTopology::kRing) peers = {wrap(rank - 1, world), wrap(rank + 1, world)};
  if (t == GossipTopology::kExponential) {
    for (int hop = 1; hop < world; hop *= 2) {
      peers.insert(wrap(rank + hop, world));
      peers.insert(wrap(rank - hop, world));
    }
  }
  if (t == GossipTopology::kTorus) peers = torus(rank, world);
  peers.erase(rank);
  GossipPeers p;
  p.neighbours.assign(peers.begin(), peers.end());
  p.weight = 1.0 / double(p.neighbours.size() + 1);
  return p;
}

}  // namespace cohort::parallel
