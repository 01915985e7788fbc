// Bucket assignment: sizes, caps, order.
#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "cohort/parallel/buckets.h"

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

TEST(AssignBuckets, ZeroCapIsRejected) {
  EXPECT_THROW(assign_buckets({0}, {4}, 0, 64), InvalidArgument);
}

}  // namespace
}  // namespace cohort::parallel
