// Byte-level text dataset and the default KJV corpus.
#include <gtest/gtest.h>

#include <filesystem>

#include "cohort/data/text.h"
#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;

std::string corpus(int64_t n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int64_t i = 0; i < n; ++i) s[size_t(i)] = char((i * 7 + i / 256) % 256);
  return s;
}

// Checks that row b of the batch is the window at byte offset `start` of `text`.
void expect_window(const Batch& batch, int64_t b, const std::string& text, int64_t start) {
  const int64_t t_len = batch.x.size(1);
  auto x = batch.x.to_vector<int64_t>();
  auto y = batch.y.to_vector<int64_t>();
  for (int64_t t = 0; t < t_len; ++t) {
    ASSERT_EQ(x[size_t(b * t_len + t)], uint8_t(text[size_t(start + t)])) << "t " << t;
    ASSERT_EQ(y[size_t(b * t_len + t)], uint8_t(text[size_t(start + t + 1)])) << "t " << t;
  }
}

TEST(Text, SplitSizesAndWindowsOffsetByOne) {
  TempDir dir;
  std::string path = dir.file("c.txt"), text = corpus(1000);
  write_bytes(path, text);
  TextSplits s = load_text(path, {.block_size = 8, .val_fraction = 0.1});
  EXPECT_EQ(s.train.num_bytes(), 900);
  EXPECT_EQ(s.validation.num_bytes(), 100);
  EXPECT_EQ(s.train.size(), 900 - 8);                 // every offset with a full window
  EXPECT_EQ(s.validation.size(), (100 - 9) / 8 + 1);  // non-overlapping windows
  std::vector<int64_t> idx = {0, 891, 17};
  Batch b = s.train.get_batch(idx);
  EXPECT_EQ(b.x.shape(), (Shape{3, 8}));
  EXPECT_EQ(b.x.dtype(), DType::i64);
  EXPECT_EQ(b.y.shape(), (Shape{3, 8}));
  for (int64_t k = 0; k < 3; ++k) expect_window(b, k, text, idx[size_t(k)]);
  std::vector<int64_t> vidx = {0, 11};
  Batch v = s.validation.get_batch(vidx);
  expect_window(v, 0, text, 900);
  expect_window(v, 1, text, 900 + 11 * 8);  // the last window ends at byte 997 < 1000
  std::vector<int64_t> bad = {892};
  expect_error<InvalidArgument>([&] { s.train.get_batch(bad); }, {path, "index 892"});
  EXPECT_EQ(TextDataset::load(path, TextSplit::kValidation, {.block_size = 8}).size(), 12);
}

TEST(Text, RandomBatchesDependOnlyOnSeedAndStep) {
  TempDir dir;
  std::string path = dir.file("c.txt"), text = corpus(500);
  write_bytes(path, text);
  auto train = TextDataset::load(path, TextSplit::kTrain, {.block_size = 16});
  Batch a = train.random_batch(6, 42, 3);
  Batch b = train.random_batch(6, 42, 3);
  EXPECT_EQ(a.x.to_vector<int64_t>(), b.x.to_vector<int64_t>());
  EXPECT_NE(train.random_batch(6, 42, 4).x.to_vector<int64_t>(), a.x.to_vector<int64_t>());
  EXPECT_NE(train.random_batch(6, 43, 3).x.to_vector<int64_t>(), a.x.to_vector<int64_t>());
  // Every row is a real window of the training split (450 bytes).
  auto x = a.x.to_vector<int64_t>();
  for (int64_t row = 0; row < 6; ++row) {
    int64_t found = -1;
    for (int64_t s = 0; s + 17 <= 450 && found < 0; ++s) {
      if (int64_t(uint8_t(text[size_t(s)])) == x[size_t(row * 16)] &&
          std::equal(x.begin() + row * 16, x.begin() + row * 16 + 16, text.begin() + s,
                     [](int64_t v, char c) { return v == uint8_t(c); })) {
        found = s;
      }
    }
    ASSERT_GE(found, 0) << "row " << row << " is not a window of the training split";
    expect_window(a, row, text, found);
  }
}

// Row g of a step's global batch is the same whichever worker draws it: a batch of 6 is rows
// 0..5, and two batches of 3 starting at rows 0 and 3 (two workers) are the same rows.
TEST(Text, RandomBatchRowsDependOnTheirGlobalRowOnly) {
  TempDir dir;
  std::string path = dir.file("c.txt");
  write_bytes(path, corpus(500));
  auto train = TextDataset::load(path, TextSplit::kTrain, {.block_size = 16});
  auto whole = train.random_batch(6, 42, 3).x.to_vector<int64_t>();
  auto first = train.random_batch(3, 42, 3, 0).x.to_vector<int64_t>();
  auto second = train.random_batch(3, 42, 3, 3).x.to_vector<int64_t>();
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, whole);
  auto y_whole = train.random_batch(6, 42, 3).y.to_vector<int64_t>();
  auto y_last = train.random_batch(1, 42, 3, 5).y.to_vector<int64_t>();
  EXPECT_TRUE(std::equal(y_last.begin(), y_last.end(), y_whole.end() - 16));
  EXPECT_THROW(train.random_batch(3, 42, 3, -1), InvalidArgument);
}

TEST(Text, BadInputs) {
  TempDir dir;
  std::string path = dir.file("tiny.txt");
  write_bytes(path, "0123456789");  // 10 bytes < block_size 9 + 2
  expect_error<InvalidArgument>([&] { load_text(path, {.block_size = 9, .val_fraction = 0}); },
                                {path, "10 bytes", "need at least 11"});
  EXPECT_EQ(load_text(path, {.block_size = 8, .val_fraction = 0}).train.size(), 2);
  EXPECT_EQ(load_text(path, {.block_size = 8, .val_fraction = 0}).validation.size(), 0);
  expect_error<InvalidArgument>([&] { load_text(path, {.block_size = 8, .val_fraction = 0.5}); },
                                {path, "training split holds 5 bytes"});
  std::string missing = dir.file("missing.txt");
  expect_error<IoError>([&] { load_text(missing); }, {missing});
}

TEST(Text, KjvIsExtractedOnceIntoTheCache) {
  KjvOptions opts;
  TempDir dir;
  opts.cache_dir = dir.file("cache");
  opts.program = dir.file("no-such-bible");
  expect_error<IoError>([&] { kjv_path(opts); }, {opts.program, "bible-kjv"});
  opts.program = "/usr/bin/bible";
  if (!std::filesystem::exists(opts.program)) {
    GTEST_SKIP() << "/usr/bin/bible missing (apt-get install bible-kjv)";
  }
  std::string path = kjv_path(opts);
  EXPECT_EQ(path, dir.file("cache/kjv.txt"));
  std::string text = read_bytes(path);
  EXPECT_GT(text.size(), 4'000'000u);
  EXPECT_NE(text.find("In the beginning God created the heaven and the earth."), std::string::npos);
  EXPECT_NE(text.find("The grace of our Lord Jesus Christ be with you all. Amen."),
            std::string::npos);
  auto mtime = std::filesystem::last_write_time(path);
  EXPECT_EQ(kjv_path(opts), path);
  EXPECT_EQ(std::filesystem::last_write_time(path), mtime);  // not rewritten
  for (const auto& e : std::filesystem::directory_iterator(dir.file("cache"))) {
    EXPECT_EQ(e.path().filename(), "kjv.txt") << "temporary left behind";
  }
  TextSplits s = load_text(path, {.block_size = 64});
  EXPECT_EQ(s.train.num_bytes() + s.validation.num_bytes(), int64_t(text.size()));
}

}  // namespace
}  // namespace cohort::data
