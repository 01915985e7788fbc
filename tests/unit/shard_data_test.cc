// Shard directories (train/shard_data.h): which files are shards, which a worker opens, and a
// worker's shards joined into one data set whose batches keep the order asked for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cohort/data/concat.h"
#include "cohort/train/shard_data.h"
#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;
using data::expect_error;

// Sample i of part `base` is x = [base + i, -(base + i)], y = (base + i) % classes.
class CountingPart final : public data::LabeledDataset {
 public:
  CountingPart(int64_t base, int64_t n, Shape shape = {2}, int64_t classes = 3)
      : base_(base), n_(n), shape_(shape), classes_(classes) {}
  int64_t size() const override { return n_; }
  data::Batch get_batch(std::span<const int64_t> idx) const override {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t i : idx) {
      x.push_back(float(base_ + i));
      x.push_back(-float(base_ + i));
      y.push_back((base_ + i) % classes_);
    }
    return {from_vector(x, {int64_t(idx.size()), 2}), from_vector_i64(y, {int64_t(idx.size())})};
  }
  const Shape& sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }

 private:
  int64_t base_, n_;
  Shape shape_;
  int64_t classes_;
};

TEST(ConcatDataset, NumbersSamplesShardAfterShardAndKeepsTheBatchOrder) {
  data::ConcatDataset all(
      {std::make_shared<CountingPart>(100, 3), std::make_shared<CountingPart>(200, 2, Shape{2}, 5)},
      {"a", "b"});
  EXPECT_EQ(all.size(), 5);
  EXPECT_EQ(all.num_classes(), 5);
  std::vector<int64_t> idx{4, 0, 3, 2};  // b1, a0, b0, a2
  data::Batch b = all.get_batch(idx);
  EXPECT_EQ(b.x.to_vector<float>(),
            (std::vector<float>{201, -201, 100, -100, 200, -200, 102, -102}));
  EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 0}));
  expect_error<InvalidArgument>(
      [] {
        data::ConcatDataset(
            {std::make_shared<CountingPart>(0, 1), std::make_shared<CountingPart>(0, 1, Shape{3})},
            {"one.csv", "two.csv"});
      },
      {"two.csv has samples of shape [3]", "one.csv has [2]"});
}

TEST(ShardFiles, FindsCsvFilesAndNumpyShardsSortedByName) {
  testing::TempDir tmp;
  const fs::path d = tmp.path();
  for (const char* f : {"b.csv", "a.csv", "notes.txt"}) std::ofstream(d / f) << "1\n";
  EXPECT_EQ(shard_files("csv", d.string()),
            (std::vector<std::string>{(d / "a.csv").string(), (d / "b.csv").string()}));
  fs::create_directories(d / "n" / "s1");
  for (const char* f : {"s1/x.npy", "s1/y.npy", "b.npz", "a.npz"}) std::ofstream(d / "n" / f);
  EXPECT_EQ(shard_files("numpy", (d / "n").string()),
            (std::vector<std::string>{(d / "n" / "a.npz").string(), (d / "n" / "b.npz").string(),
                                      (d / "n" / "s1").string()}));
  // A directory holding x.npy and y.npy is one data set, not shards; a file is not a directory.
  EXPECT_TRUE(shard_files("numpy", (d / "n" / "s1").string()).empty());
  EXPECT_TRUE(shard_files("csv", (d / "a.csv").string()).empty());
  fs::create_directories(d / "empty");
  expect_error<InvalidArgument>([&] { shard_files("csv", (d / "empty").string()); },
                                {"is a directory without any .csv file"});
}

TEST(ShardFiles, AWorkerOpensEveryNthShardFromItsRank) {
  std::vector<std::string> files{"s0", "s1", "s2", "s3", "s4"};
  std::vector<std::string> opened;
  auto open = [&](const std::string& f) -> std::shared_ptr<const data::LabeledDataset> {
    opened.push_back(f);
    return std::make_shared<CountingPart>(0, 1);
  };
  EXPECT_EQ(open_my_shards("dir", files, {1, 2}, open)->size(), 2);
  EXPECT_EQ(opened, (std::vector<std::string>{"s1", "s3"}));
  expect_error<InvalidArgument>(
      [&] {
        open_my_shards("dir", files, {0, 6}, open);
      },
      {"data.path 'dir' holds 5 shard(s) for 6 workers"});
}

}  // namespace
}  // namespace cohort::train
