// Subset views of a dataset: IndexSubset (a federated client's share) maps its positions to the
// base's samples and rejects a bad index once, at construction.
#include <gtest/gtest.h>

#include <memory>

#include "cohort/data/dataset.h"
#include "cohort/data/synthetic.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

std::shared_ptr<const Dataset> small_base() {
  return std::make_shared<Synthetic>(SyntheticOptions{.num_samples = 20, .shape = {3}});
}

// The rows of `b` equal rows `rows` of `a`, x and y alike.
void expect_same_rows(const Batch& a, const std::vector<int64_t>& rows, const Batch& b) {
  ASSERT_EQ(b.x.size(0), int64_t(rows.size()));
  const int64_t f = a.x.size(1);
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(b.y.data<int64_t>()[k], a.y.data<int64_t>()[rows[k]]) << "row " << k;
    for (int64_t j = 0; j < f; ++j) {
      EXPECT_EQ(b.x.data<float>()[int64_t(k) * f + j], a.x.data<float>()[rows[k] * f + j]);
    }
  }
}

TEST(IndexSubset, MapsPositionsThroughTheList) {
  auto base = small_base();
  std::vector<int64_t> all(20);
  for (int64_t i = 0; i < 20; ++i) all[size_t(i)] = i;
  Batch whole = base->get_batch(all);

  IndexSubset sub(base, {17, 3, 3, 0, 9});  // repeats allowed: a bootstrap draw
  EXPECT_EQ(sub.size(), 5);
  std::vector<int64_t> pos = {4, 0, 1, 3};
  expect_same_rows(whole, {9, 17, 3, 0}, sub.get_batch(pos));
}

TEST(IndexSubset, EmptyListIsAnEmptyDataset) {
  IndexSubset sub(small_base(), {});
  EXPECT_EQ(sub.size(), 0);
}

TEST(IndexSubset, BadIndexAtConstructionNamesIt) {
  expect_error<InvalidArgument>(
      [] {
        IndexSubset(small_base(), {0, 5, 20, 1});
      },
      {"IndexSubset", "index 20", "position 2", "[0, 20)"});
  expect_error<InvalidArgument>([] { IndexSubset(small_base(), {-1}); }, {"index -1"});
  expect_error<InvalidArgument>([] { IndexSubset(nullptr, {0}); }, {"null"});
}

TEST(IndexSubset, BadPositionInABatch) {
  IndexSubset sub(small_base(), {1, 2, 3});
  std::vector<int64_t> pos = {0, 3};
  expect_error<InvalidArgument>([&] { sub.get_batch(pos); }, {"IndexSubset", "index 3", "[0, 3)"});
}

}  // namespace
}  // namespace cohort::data
