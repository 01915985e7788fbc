// Sub-groups (split, new_group) and several communicators on one store.
#include <gtest/gtest.h>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

TEST(CommGroups, SecondCommunicatorOnTheSameStoreAndPrefixWorks) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(3, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      auto c = Communicator::create(store, r, 3, test_options(TransportKind::kTcp));
      int32_t v = r + round;
      allreduce(*c, {.output = &v, .count = 1, .dtype = DType::i32});
      EXPECT_EQ(v, 3 + 3 * round);
    }
  });
}

TEST(CommGroups, SplitAndNewGroupRunTheirOwnCollectives) {
  with_comms(5, test_options(TransportKind::kShm), [&](Communicator& c) {
    // Even and odd ranks, ordered by descending key.
    auto half = c.split(c.rank() % 2, -c.rank());
    ASSERT_NE(half, nullptr);
    int members = c.rank() % 2 == 0 ? 3 : 2;
    EXPECT_EQ(half->size(), members);
    float x = float(c.rank());
    allreduce(*half, {.output = &x, .count = 1});
    EXPECT_EQ(x, c.rank() % 2 == 0 ? 0.0f + 2 + 4 : 1.0f + 3);
    // Highest rank first.
    int expect_rank = c.rank() % 2 == 0 ? (4 - c.rank()) / 2 : (3 - c.rank()) / 2;
    EXPECT_EQ(half->rank(), expect_rank);

    auto trio = c.new_group({4, 0, 2});
    if (c.rank() % 2 == 1) {
      EXPECT_EQ(trio, nullptr);
    } else {
      ASSERT_NE(trio, nullptr);
      EXPECT_EQ(trio->rank(), c.rank() == 4 ? 0 : c.rank() == 0 ? 1 : 2);
      int64_t v = c.rank();
      allreduce(*trio, {.output = &v, .count = 1, .dtype = DType::i64, .op = ReduceOp::max});
      EXPECT_EQ(v, 4);
    }
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    EXPECT_EQ(none == nullptr, c.rank() == 0);
    // The parent still works after its groups did.
    barrier(c);
  });
}

}  // namespace
}  // namespace cohort::comm
