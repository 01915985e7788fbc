// Hierarchical allreduce: ranks-as-threads pretend to be on several hosts (CommOptions::host_id)
// and every dtype and op is checked against a straightforward reference; the topology, the
// automatic choice, and mismatch detection against a flat algorithm.
#include <gtest/gtest.h>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

// Rank r is on host host_of(r); each rank runs fn on its own communicator.
void with_hosts(int size, const std::function<int(int)>& host_of, TransportKind kind,
                const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(size, [&](int r) {
    CommOptions o = test_options(kind);
    o.host_id = detail::str("fake-host-", host_of(r));
    auto c = Communicator::create(store, r, size, o);
    fn(*c);
  });
}

void check_allreduce(Communicator& c, DType t, ReduceOp op, size_t count, Algorithm algo) {
  auto in = make_input(t, op, c.rank(), count);
  auto want = reference(t, op, c.size(), count);
  bool in_place = count % 2 == 1;
  std::vector<char> out(in.size(), 0);
  if (in_place) out = in;
  allreduce(c, {.input = in_place ? nullptr : in.data(),
                .output = out.data(),
                .count = count,
                .dtype = t,
                .op = op,
                .algorithm = algo});
  std::string diff = compare(t, out.data(), want.data(), count);
  EXPECT_EQ(diff, "") << "rank " << c.rank() << " of " << c.size() << " ("
                      << c.topology().describe() << ") " << dtype_name(t) << " "
                      << reduce_op_name(op) << " count " << count;
}

// 0, 1, a prime, and more than one 1 KiB chunk (test_options) in every phase.
const std::vector<size_t> kCounts = {0, 1, 1009, 2 * 1024 + 7};

void run_matrix(int hosts, int per_host, const std::function<int(int)>& host_of,
                TransportKind kind) {
  with_hosts(hosts * per_host, host_of, kind, [&](Communicator& c) {
    ASSERT_EQ(c.topology().num_hosts(), hosts) << c.topology().describe();
    for (DType t : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        for (size_t count : kCounts) check_allreduce(c, t, op, count, Algorithm::kHierarchical);
      }
    }
  });
}

TEST(Hierarchical, TwoHostsOfTwoInterleavedRanksShm) {
  // Hosts {0, 2} and {1, 3}: leaders and host members are not contiguous ranks.
  run_matrix(
      2, 2, [](int r) { return r % 2; }, TransportKind::kShm);
}

TEST(Hierarchical, TwoHostsOfTwoRanksTcp) {
  run_matrix(
      2, 2, [](int r) { return r / 2; }, TransportKind::kTcp);
}

TEST(Hierarchical, TwoHostsOfThreeRanksShm) {
  run_matrix(
      2, 3, [](int r) { return r / 3; }, TransportKind::kShm);
}

TEST(Hierarchical, ThreeHostsOfOneRankShm) {
  run_matrix(
      3, 1, [](int r) { return r; }, TransportKind::kShm);
}

TEST(Hierarchical, OneHostOfThreeRanksIsAChainAndBroadcast) {
  with_hosts(
      3, [](int) { return 0; }, TransportKind::kShm,
      [&](Communicator& c) {
        for (ReduceOp op : kAllOps)
          check_allreduce(c, DType::f32, op, 1009, Algorithm::kHierarchical);
      });
}

TEST(Hierarchical, TopologyGroupsRanksByHostIdOnEveryRank) {
  with_hosts(
      5, [](int r) { return r == 3 ? 0 : r % 2 + 1; }, TransportKind::kShm,
      [&](Communicator& c) {
        const HostTopology& t = c.topology();
        EXPECT_EQ(t.describe(), "3 hosts: [0 2 4] [1] [3]");
        EXPECT_EQ(t.leaders(), (std::vector<int>{0, 1, 3}));
        EXPECT_EQ(t.host_of, (std::vector<int>{0, 1, 0, 2, 0}));
        EXPECT_TRUE(t.is_hierarchical());
      });
}

TEST(Hierarchical, AutoPicksHierarchicalOnlyAcrossHostsWithSeveralRanks) {
  with_hosts(
      4, [](int r) { return r / 2; }, TransportKind::kShm,
      [&](Communicator& c) {
        EXPECT_EQ(choose_allreduce_algorithm(c, 4), Algorithm::kHierarchical);
        EXPECT_EQ(choose_allreduce_algorithm(c, 64 << 20), Algorithm::kHierarchical);
        check_allreduce(c, DType::f32, ReduceOp::avg, 5003, Algorithm::kAuto);
      });
  // One host, or one rank per host: nothing to gain, the flat algorithms stay.
  with_hosts(
      3, [](int r) { return r; }, TransportKind::kShm,
      [&](Communicator& c) {
        EXPECT_FALSE(c.topology().is_hierarchical());
        EXPECT_NE(choose_allreduce_algorithm(c, 64 << 20), Algorithm::kHierarchical);
      });
  with_comms(2, test_options(TransportKind::kShm), [&](Communicator& c) {
    EXPECT_EQ(c.topology().num_hosts(), 1);
    EXPECT_NE(choose_allreduce_algorithm(c, 64 << 20), Algorithm::kHierarchical);
  });
}

TEST(Hierarchical, BitIdenticalOnEveryRankAndRunForInexactSums) {
  // Values whose float sum depends on the order: every rank must still hold the same bits,
  // and two runs the same bits.
  const int n = 6;
  const size_t count = 3001;
  std::vector<std::vector<float>> results(2 * n);
  for (int run = 0; run < 2; ++run) {
    with_hosts(
        n, [](int r) { return r / 3; }, TransportKind::kShm,
        [&](Communicator& c) {
          std::vector<float> buf(count);
          for (size_t i = 0; i < count; ++i) buf[i] = 1.0f / float(3 + i + size_t(c.rank()) * 7);
          allreduce(c,
                    {.output = buf.data(), .count = count, .algorithm = Algorithm::kHierarchical});
          results[size_t(run * n + c.rank())] = buf;
        });
  }
  for (size_t k = 1; k < results.size(); ++k) {
    ASSERT_EQ(std::memcmp(results[k].data(), results[0].data(), count * 4), 0) << "result " << k;
  }
}

TEST(Hierarchical, MismatchWithFlatAlgorithmFailsNamingBoth) {
  with_hosts(
      2, [](int r) { return r; }, TransportKind::kShm,
      [&](Communicator& c) {
        std::vector<float> buf(16, 1.0f);
        Algorithm a = c.rank() == 0 ? Algorithm::kHierarchical : Algorithm::kRing;
        std::string msg = error_of<CollectiveMismatch>(
            [&] { allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = a}); });
        EXPECT_NE(msg.find("hierarchical"), std::string::npos) << msg;
        EXPECT_NE(msg.find("ring"), std::string::npos) << msg;
      });
}

}  // namespace
}  // namespace cohort::comm
