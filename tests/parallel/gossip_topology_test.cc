// The gossip graphs (parallel/decentralized/gossip_topology.h): the neighbours each topology gives,
// and the property D-PSGD needs: symmetric and regular, so uniform weights are doubly stochastic.
#include "cohort/parallel/decentralized/gossip_topology.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

using Peers = std::vector<int>;

TEST(GossipTopology, RingExponentialAndTorusNeighbours) {
  EXPECT_EQ(gossip_peers(GossipTopology::kRing, 0, 5).neighbours, (Peers{1, 4}));
  EXPECT_EQ(gossip_peers(GossipTopology::kRing, 1, 2).neighbours, (Peers{0}));
  EXPECT_EQ(gossip_peers(GossipTopology::kRing, 0, 1).neighbours, (Peers{}));
  EXPECT_EQ(gossip_peers(GossipTopology::kExponential, 0, 8).neighbours, (Peers{1, 2, 4, 6, 7}));
  // 6 = 2 x 3: rank 4 is row 1, column 1; up and down are both row 0.
  EXPECT_EQ(gossip_peers(GossipTopology::kTorus, 4, 6).neighbours, (Peers{1, 3, 5}));
  // 9 = 3 x 3: four distinct neighbours.
  EXPECT_EQ(gossip_peers(GossipTopology::kTorus, 0, 9).neighbours, (Peers{1, 2, 3, 6}));
  EXPECT_DOUBLE_EQ(gossip_peers(GossipTopology::kTorus, 0, 9).weight, 0.2);
}

TEST(GossipTopology, EveryGraphIsSymmetricAndRegularSoItsMixingIsDoublyStochastic) {
  for (GossipTopology t :
       {GossipTopology::kRing, GossipTopology::kExponential, GossipTopology::kTorus}) {
    for (int world = 1; world <= 12; ++world) {
      const size_t degree = gossip_peers(t, 0, world).neighbours.size();
      for (int r = 0; r < world; ++r) {
        const GossipPeers p = gossip_peers(t, r, world);
        EXPECT_EQ(p.neighbours.size(), degree) << "world " << world << " rank " << r;
        EXPECT_DOUBLE_EQ(p.weight * double(degree + 1), 1.0);
        for (int j : p.neighbours) {
          const Peers back = gossip_peers(t, j, world).neighbours;
          EXPECT_TRUE(std::count(back.begin(), back.end(), r)) << r << " -> " << j;
        }
      }
    }
  }
}

TEST(GossipTopology, AnUnknownTopologyIsAnErrorNamingTheKey) {
  try {
    parse_gossip_topology("star");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gossip.topology = 'star'"), std::string::npos);
  }
}

}  // namespace
}  // namespace cohort::parallel
