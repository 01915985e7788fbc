// The parameter server's key space (ps/partition.h): balanced contiguous ranges that cover every
// key, a tensor spanning two servers, tied weights laid out once, and the model check's message.
#include "cohort/ps/partition.h"

#include <gtest/gtest.h>

namespace cohort::ps {
namespace {

TEST(PsPartition, RangesAreContiguousBalancedAndCoverEveryKey) {
  for (int64_t total : {1, 7, 10, 1000, 535818}) {
    for (int s = 1; s <= 5 && s <= total; ++s) {
      std::vector<KeyRange> r = partition_keys(total, s);
      ASSERT_EQ(r.size(), size_t(s));
      EXPECT_EQ(r.front().begin, 0);
      EXPECT_EQ(r.back().end, total);
      for (int i = 0; i < s; ++i) {
        if (i > 0) EXPECT_EQ(r[i].begin, r[i - 1].end);
        EXPECT_GE(r[i].size(), total / s);  // within one key (4 bytes) of the even share
        EXPECT_LE(r[i].size(), total / s + 1);
      }
    }
  }
  EXPECT_EQ(partition_keys(10, 3), (std::vector<KeyRange>{{0, 3}, {3, 6}, {6, 10}}));
}

TEST(PsPartition, MoreServersThanKeysIsAnError) {
  EXPECT_THROW(partition_keys(3, 4), InvalidArgument);
  EXPECT_THROW(partition_keys(3, 0), InvalidArgument);
  try {
    partition_keys(3, 4);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("4 servers for a model of 3 parameters"),
              std::string::npos)
        << e.what();
  }
}

TEST(PsPartition, ATensorSpansTwoServersAndMovesBothWays) {
  Tensor a = from_vector({1, 2, 3, 4, 5}, {5});
  Tensor b = from_vector({10, 11, 12, 13, 14, 15, 16}, {7});
  NamedTensors params = {{"a", a}, {"b", b}};
  Layout l = layout_of(params);
  EXPECT_EQ(l.total, 12);
  std::vector<KeyRange> r = partition_keys(l.total, 2);  // [0, 6) and [6, 12): b spans both
  std::vector<float> first(6), second(6);
  gather_values(params, l, r[0], first.data());
  gather_values(params, l, r[1], second.data());
  EXPECT_EQ(first, (std::vector<float>{1, 2, 3, 4, 5, 10}));
  EXPECT_EQ(second, (std::vector<float>{11, 12, 13, 14, 15, 16}));
  std::vector<float> back = {-1, -2, -3, -4, -5, -6};
  scatter_values(params, l, r[1], back.data());
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{10, -1, -2, -3, -4, -5, -6}));
  std::vector<float> grads(6, 7.0f);
  gather_grads(params, l, r[0], grads.data());  // no .grad yet: zeros
  EXPECT_EQ(grads, std::vector<float>(6, 0.0f));
}

TEST(PsPartition, TiedWeightsAreLaidOutOnceAndDifferencesAreNamed) {
  Tensor w = from_vector({1, 2, 3, 4}, {2, 2});
  Tensor bias = from_vector({0, 0}, {2});
  Layout tied = layout_of({{"embed.weight", w}, {"bias", bias}, {"head.weight", w}});
  ASSERT_EQ(tied.params.size(), 2u);
  EXPECT_EQ(tied.total, 6);
  EXPECT_EQ(tied.params[1].index, 1u);
  Layout other = layout_of({{"embed.weight", w}, {"bias", from_vector({0, 0, 0}, {3})}});
  EXPECT_EQ(first_difference(tied, tied, "a", "b"), "");
  EXPECT_EQ(first_difference(other, tied, "worker 1", "the server"),
            "parameter 1: worker 1 has 'bias' (3 elements), the server has 'bias' (2 elements)");
}

}  // namespace
}  // namespace cohort::ps
