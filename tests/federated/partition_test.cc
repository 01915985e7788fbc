// Client data partitions: IID and Dirichlet(alpha) label skew, and the Gamma sampler under them.
#include "cohort/federated/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

// 6000 samples in 10 classes with uneven class sizes (class k holds 510 + 20k samples), in a
// scrambled order so that no test accidentally passes on sorted labels.
std::vector<int64_t> make_labels() {
  std::vector<int64_t> y;
  for (int k = 0; k < 10; ++k) y.insert(y.end(), size_t(510 + 20 * k), k);
  PhiloxStream rng(1234);
  for (size_t i = y.size(); i > 1; --i) std::swap(y[i - 1], y[size_t(rng.below(i))]);
  return y;
}

void expect_exact_cover(const std::vector<std::vector<int64_t>>& parts, int64_t n) {
  std::vector<int> seen(size_t(n), 0);
  for (const auto& p : parts) {
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    for (int64_t i : p) {
      ASSERT_TRUE(i >= 0 && i < n) << i;
      ++seen[size_t(i)];
    }
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[size_t(i)], 1) << "sample " << i;
}

// Mean over clients of the largest class share: 1/C for perfectly balanced clients, 1 when
// every client holds a single class.
double mean_max_share(const std::vector<std::vector<int64_t>>& counts) {
  double sum = 0;
  for (const auto& row : counts) {
    int64_t total = 0, top = 0;
    for (int64_t x : row) total += x, top = std::max(top, x);
    sum += double(top) / double(total);
  }
  return sum / double(counts.size());
}

TEST(Partition, IidCoversEverySampleOnceWithNearEqualSizes) {
  auto y = make_labels();
  auto parts = partition_indices(y, 10, {.kind = PartitionKind::kIid, .clients = 7});
  ASSERT_EQ(parts.size(), 7u);
  expect_exact_cover(parts, int64_t(y.size()));
  size_t lo = parts[0].size(), hi = lo;
  for (const auto& p : parts) lo = std::min(lo, p.size()), hi = std::max(hi, p.size());
  EXPECT_LE(hi - lo, 1u);

  // Each client's label shares track the global ones (857 samples per client: a share's
  // standard error is about 0.01, so 0.05 is five of them).
  auto counts = label_histogram(y, 10, parts);
  for (const auto& row : counts) {
    int64_t total = 0;
    for (int64_t x : row) total += x;
    for (int k = 0; k < 10; ++k) {
      double global = double(510 + 20 * k) / double(y.size());
      EXPECT_NEAR(double(row[size_t(k)]) / double(total), global, 0.05);
    }
  }
}

TEST(Partition, DeterministicAndSeedDependent) {
  auto y = make_labels();
  for (auto kind : {PartitionKind::kIid, PartitionKind::kDirichlet}) {
    PartitionOptions o{.kind = kind, .clients = 5, .alpha = 0.5, .seed = 3};
    auto a = partition_indices(y, 10, o);
    EXPECT_EQ(a, partition_indices(y, 10, o));
    o.seed = 4;
    EXPECT_NE(a, partition_indices(y, 10, o));
  }
}

TEST(Partition, DirichletSkewGrowsAsAlphaShrinks) {
  auto y = make_labels();
  PartitionOptions o{.kind = PartitionKind::kDirichlet, .clients = 10, .seed = 7};
  o.alpha = 100;
  auto near_iid = partition_indices(y, 10, o);
  expect_exact_cover(near_iid, int64_t(y.size()));
  o.alpha = 0.1;
  o.min_samples = 5;
  auto skewed = partition_indices(y, 10, o);
  expect_exact_cover(skewed, int64_t(y.size()));

  double iid_share = mean_max_share(label_histogram(y, 10, near_iid));
  double skew_share = mean_max_share(label_histogram(y, 10, skewed));
  // alpha = 100: each share is about 1/10 +- 0.03, the max of ten about 0.16; alpha = 0.1:
  // a client's classes are dominated by one (expected max share well above 0.5).
  EXPECT_LT(iid_share, 0.2);
  EXPECT_GT(skew_share, 0.5);
}

TEST(Partition, DirichletHonoursMinSamples) {
  auto y = make_labels();
  PartitionOptions o{.kind = PartitionKind::kDirichlet,
                     .clients = 20,
                     .alpha = 0.1,
                     .seed = 11,
                     .min_samples = 60};
  auto parts = partition_indices(y, 10, o);
  expect_exact_cover(parts, int64_t(y.size()));
  for (const auto& p : parts) EXPECT_GE(p.size(), 60u);
}

TEST(Partition, DirichletGivesUpWithAClearError) {
  auto y = make_labels();
  // 40 clients of >= 150 of the 6000 samples each: every one must hold exactly 150, which tiny
  // alpha never draws.
  PartitionOptions o{
      .kind = PartitionKind::kDirichlet, .clients = 40, .alpha = 0.01, .min_samples = 150};
  try {
    partition_indices(y, 10, o);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("raise fl.alpha or lower fl.min_samples"), std::string::npos) << msg;
  }
}

TEST(Partition, BadOptionsNameTheKey) {
  auto y = make_labels();
  auto expect_key = [&](PartitionOptions o, const std::string& key) {
    try {
      partition_indices(y, 10, o);
      ADD_FAILURE() << "no error for " << key;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_key({.clients = 0}, "fl.clients");
  expect_key({.kind = PartitionKind::kDirichlet, .alpha = 0}, "fl.alpha");
  expect_key({.kind = PartitionKind::kDirichlet, .alpha = -1}, "fl.alpha");
  expect_key({.clients = 100, .min_samples = 61}, "fl.min_samples");
  expect_key({.min_samples = -1}, "fl.min_samples");
  std::vector<int64_t> bad = {0, 1, 10};
  EXPECT_THROW(partition_indices(bad, 10, {.clients = 1, .min_samples = 0}), InvalidArgument);
}

TEST(Partition, ParseKind) {
  EXPECT_EQ(parse_partition_kind("iid"), PartitionKind::kIid);
  EXPECT_EQ(parse_partition_kind("dirichlet"), PartitionKind::kDirichlet);
  try {
    parse_partition_kind("shards");
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("shards"), std::string::npos);
    EXPECT_NE(msg.find("iid, dirichlet"), std::string::npos);
  }
}

TEST(Partition, HistogramTableAndJson) {
  std::vector<int64_t> y = {0, 1, 1, 2, 2, 2};
  std::vector<std::vector<int64_t>> parts = {{0, 3}, {1, 2, 4, 5}};
  auto counts = label_histogram(y, 3, parts);
  EXPECT_EQ(counts, (std::vector<std::vector<int64_t>>{{1, 0, 1}, {0, 2, 2}}));
  std::string table = format_histogram(counts);
  EXPECT_NE(table.find("client"), std::string::npos);
  EXPECT_NE(table.find("total"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
  auto j = histogram_json(counts);
  EXPECT_EQ(j["clients"], 2);
  EXPECT_EQ(j["classes"], 3);
  EXPECT_EQ(j["totals"], nlohmann::json({2, 4}));
  EXPECT_EQ(j["counts"][1][2], 2);
}

// Gamma(a, 1) has mean a and variance a. With 200k draws the standard error of the sample mean
// is sqrt(a / n), of the sample variance about a * sqrt((2 + 6 / a) / n): the bounds below are
// five of those, so a correct sampler passes with a fixed seed and a wrong shape (an off-by-one
// in the boost, a missing 1/3) fails by far more.
TEST(Gamma, MeanAndVarianceMatchTheShape) {
  constexpr int n = 200000;
  for (double a : {0.1, 0.5, 1.0, 5.0}) {
    PhiloxStream rng(42, uint64_t(a * 1000));
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
      double g = sample_gamma(a, rng);
      ASSERT_GE(g, 0);
      sum += g;
      sum2 += g * g;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    EXPECT_NEAR(mean, a, 5 * std::sqrt(a / n)) << "shape " << a;
    EXPECT_NEAR(var, a, 5 * a * std::sqrt((2 + 6 / a) / n)) << "shape " << a;
  }
}

TEST(Gamma, DirichletSumsToOneEvenForTinyAlpha) {
  PhiloxStream rng(5);
  for (double alpha : {0.001, 0.1, 1.0, 50.0}) {
    auto p = sample_dirichlet(alpha, 30, rng);
    double s = 0;
    for (double x : p) {
      ASSERT_TRUE(x >= 0 && std::isfinite(x)) << x;
      s += x;
    }
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
}

}  // namespace
}  // namespace cohort::federated
