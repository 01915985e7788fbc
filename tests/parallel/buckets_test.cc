// Bucket assignment: sizes, caps, order.
#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "cohort/parallel/ddp/buckets.h"

namespace cohort::parallel {
namespace {

TEST(AssignBuckets, SmallFirstBucketThenCappedBucketsInReadyOrder) {
  // Parameter numels 10, 20, 30, 5; ready order 3, 2, 1, 0. First cap 10 floats, then 50.
  auto b = assign_buckets({3, 2, 1, 0}, {10, 20, 30, 5}, 40, 200);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{3}));
  EXPECT_EQ(b[1].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(b[1].offsets, (std::vector<size_t>{0, 30}));
  EXPECT_EQ(b[1].numel, 50u);
  EXPECT_EQ(b[2].params, (std::vector<size_t>{0}));
}

TEST(AssignBuckets, OversizedParameterGetsABucketOfItsOwn) {
  auto b = assign_buckets({0, 1, 2}, {4, 1000, 4}, 64, 64);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[1].params, (std::vector<size_t>{1}));
  EXPECT_EQ(b[1].numel, 1000u);
}

// An MLP's ready order: layer 3's weight and bias, layer 2's, then layer 1's bias before its
// large weight. Alone, the bias would join the small first bucket, which would then wait for
// layer 1's whole backward; as a group, it goes with its weight.
TEST(AssignBuckets, AModulesParametersStayTogetherWhenTheyFitOneBucket) {
  //                 params: 0 l1.w  1 l1.b  2 l2.w  3 l2.b
  const std::vector<int64_t> numels = {400, 8, 100, 4};
  const std::vector<size_t> order = {3, 2, 1, 0};
  auto alone = assign_buckets(order, numels, 4 * 200, 4 * 1000);
  EXPECT_EQ(alone[0].params, (std::vector<size_t>{3, 2, 1}));
  auto grouped = assign_buckets(order, numels, 4 * 200, 4 * 1000, {0, 0, 1, 1});
  ASSERT_EQ(grouped.size(), 2u);
  EXPECT_EQ(grouped[0].params, (std::vector<size_t>{3, 2}));
  EXPECT_EQ(grouped[1].params, (std::vector<size_t>{1, 0}));
  // A group larger than any bucket is split by the caps as before.
  auto split = assign_buckets(order, numels, 4 * 200, 4 * 300, {0, 0, 1, 1});
  EXPECT_EQ(split[0].params, (std::vector<size_t>{3, 2, 1}));
  EXPECT_THROW(assign_buckets(order, numels, 64, 64, {0, 1}), InvalidArgument);
}

TEST(AssignBuckets, ZeroCapIsRejected) {
  EXPECT_THROW(assign_buckets({0}, {4}, 0, 64), InvalidArgument);
}

}  // namespace
}  // namespace cohort::parallel
