// IDX files, Fashion-MNIST, synthetic clusters. Fixtures are written to a temp dir per test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "cohort/core/thread_pool.h"
#include "cohort/data/fashion_mnist.h"
#include "cohort/data/idx.h"
#include "cohort/data/loader.h"
#include "cohort/data/synthetic.h"
#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::write_bytes;

std::vector<uint8_t> pattern(int64_t n, int mul) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = uint8_t((i * mul + 3) % 256);
  return v;
}

// Writes a Fashion-MNIST-shaped pair (n images of rows x cols, labels i % 10).
void write_pair(const std::string& images, const std::string& labels, int64_t n, int64_t rows = 28,
                int64_t cols = 28, Compression c = Compression::kGzip) {
  write_idx(images, IdxKind::kImages, {n, rows, cols}, pattern(n * rows * cols, 7).data(), c);
  std::vector<uint8_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = uint8_t(i % 10);
  write_idx(labels, IdxKind::kLabels, {n}, y.data(), c);
}

TEST(Idx, RoundTripGzipAndPlain) {
  TempDir dir;
  auto images = pattern(5 * 3 * 4, 13);
  auto labels = pattern(5, 1);
  for (Compression c : {Compression::kGzip, Compression::kNone}) {
    std::string ip = dir.file(c == Compression::kGzip ? "i.gz" : "i");
    std::string lp = dir.file(c == Compression::kGzip ? "l.gz" : "l");
    write_idx(ip, IdxKind::kImages, {5, 3, 4}, images.data(), c);
    write_idx(lp, IdxKind::kLabels, {5}, labels.data(), c);
    std::string raw = read_bytes(ip);
    EXPECT_EQ(raw.substr(0, 2) == "\x1f\x8b", c == Compression::kGzip);
    if (c == Compression::kNone) {
      EXPECT_EQ(raw.size(), 16u + 60u);
    }
    IdxArray a = read_idx(ip, IdxKind::kImages);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 3, 4}));
    EXPECT_EQ(a.data, images);
    IdxArray b = read_idx(lp, IdxKind::kLabels);
    EXPECT_EQ(b.dims, (std::vector<int64_t>{5}));
    EXPECT_EQ(b.data, labels);
  }
}

TEST(Idx, MissingFileIsIoErrorNamingIt) {
  TempDir dir;
  std::string path = dir.file("nope-images.gz");
  expect_error<IoError>([&] { read_idx(path, IdxKind::kImages); }, {path, "does not exist"});
}

TEST(Idx, TruncatedDataSaysExpectedAndFoundBytes) {
  TempDir dir;
  // 10 x 28 x 28 promised: 7856 bytes with the 16-byte header.
  const auto pixels = pattern(7840, 7);
  std::string plain = dir.file("plain"), gz = dir.file("gz");
  write_idx(plain, IdxKind::kImages, {10, 28, 28}, pixels.data(), Compression::kNone);
  write_bytes(plain, read_bytes(plain).substr(0, 116));
  expect_error<IoError>([&] { read_idx(plain, IdxKind::kImages); },
                        {plain, "expected 7856 bytes of images data", "file ends after 116"});
  write_idx(gz, IdxKind::kImages, {10, 28, 28}, pixels.data(), Compression::kGzip);
  std::string stream = read_bytes(gz);
  write_bytes(gz, stream.substr(0, stream.size() / 2));  // cut the gzip stream itself
  expect_error<IoError>([&] { read_idx(gz, IdxKind::kImages); },
                        {gz, "expected 7856 bytes of images data", "file ends after"});
}

TEST(Idx, TruncatedHeader) {
  TempDir dir;
  std::string path = dir.file("short");
  write_bytes(path, std::string("\x00\x00\x08\x03\x00\x00", 6));
  expect_error<IoError>([&] { read_idx(path, IdxKind::kImages); },
                        {path, "expected a 16-byte IDX images header", "file ends after 6"});
  write_bytes(path, "");
  expect_error<IoError>([&] { read_idx(path, IdxKind::kLabels); }, {path, "ends after 0"});
}

TEST(Idx, WrongMagicNamesBothValues) {
  TempDir dir;
  std::string path = dir.file("labels.gz");
  write_idx(path, IdxKind::kLabels, {3}, pattern(3, 1).data(), Compression::kGzip);
  expect_error<InvalidArgument>(
      [&] { read_idx(path, IdxKind::kImages); },
      {path, "magic 0x00000801", "expected 0x00000803 for an images file"});
  write_idx(path, IdxKind::kImages, {1, 2, 2}, pattern(4, 1).data(), Compression::kGzip);
  expect_error<InvalidArgument>([&] { read_idx(path, IdxKind::kLabels); },
                                {"magic 0x00000803", "expected 0x00000801 for a labels file"});
}

TEST(Idx, ZeroDimensionAndTrailingDataAreRejected) {
  TempDir dir;
  std::string path = dir.file("x");
  write_idx(path, IdxKind::kImages, {2, 0, 3}, nullptr, Compression::kNone);
  expect_error<InvalidArgument>([&] { read_idx(path, IdxKind::kImages); },
                                {path, "dimension 1", "2 x 0 x 3"});
  write_idx(path, IdxKind::kLabels, {3}, pattern(3, 1).data(), Compression::kNone);
  write_bytes(path, read_bytes(path) + "junk");
  expect_error<InvalidArgument>([&] { read_idx(path, IdxKind::kLabels); },
                                {path, "continues past the 11 bytes"});
}

TEST(FashionMnist, ImageLabelCountMismatch) {
  TempDir dir;
  std::string ip = dir.file("i.gz"), lp = dir.file("l.gz");
  write_idx(ip, IdxKind::kImages, {5, 2, 2}, pattern(20, 3).data(), Compression::kGzip);
  write_idx(lp, IdxKind::kLabels, {4}, pattern(4, 1).data(), Compression::kGzip);
  expect_error<InvalidArgument>([&] { FashionMNIST::from_files(ip, lp); },
                                {ip, lp, "5 images", "4 labels"});
}

TEST(FashionMnist, LabelOutOfRange) {
  TempDir dir;
  std::string ip = dir.file("i"), lp = dir.file("l");
  write_pair(ip, lp, 3, 2, 2, Compression::kNone);
  const uint8_t bad[3] = {1, 10, 2};
  write_idx(lp, IdxKind::kLabels, {3}, bad, Compression::kNone);
  expect_error<InvalidArgument>([&] { FashionMNIST::from_files(ip, lp); },
                                {lp, "label 1 is 10", "[0, 10)"});
}

TEST(FashionMnist, BatchesAreNormalisedRows) {
  TempDir dir;
  std::string ip = dir.file("i.gz"), lp = dir.file("l.gz");
  write_pair(ip, lp, 6, 4, 3);
  auto ds = FashionMNIST::from_files(ip, lp, {.mean = 0.5f, .std = 0.25f});
  ASSERT_EQ(ds.size(), 6);
  std::vector<int64_t> idx = {4, 1, 4};
  Batch b = ds.get_batch(idx);
  EXPECT_EQ(b.x.shape(), (Shape{3, 1, 4, 3}));
  EXPECT_EQ(b.x.dtype(), DType::f32);
  EXPECT_EQ(b.y.dtype(), DType::i64);
  EXPECT_EQ(b.y.to_vector<int64_t>(), (std::vector<int64_t>{4, 1, 4}));
  auto pix = pattern(6 * 12, 7);
  auto x = b.x.to_vector<float>();
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t j = 0; j < 12; ++j) {
      float want = (pix[size_t(idx[size_t(k)] * 12 + j)] / 255.0f - 0.5f) / 0.25f;
      EXPECT_NEAR(x[size_t(k * 12 + j)], want, 1e-5f);
    }
  }
  auto flat = FashionMNIST::from_files(ip, lp, {.layout = ImageLayout::kFlat});
  EXPECT_EQ(flat.get_batch(idx).x.shape(), (Shape{3, 12}));
  std::vector<int64_t> out_of_range = {0, 6};
  expect_error<InvalidArgument>([&] { ds.get_batch(out_of_range); }, {"index 6", "[0, 6)"});
}

TEST(FashionMnist, DiscoveryOrderAndErrorListingPlaces) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("a"));
  std::filesystem::create_directories(dir.file("b"));
  using S = FashionMNIST::Split;
  write_pair(dir.file("b/" + FashionMNIST::images_file(S::kTest)),
             dir.file("b/" + FashionMNIST::labels_file(S::kTest)), 3);
  // The config directory is used when no explicit one is given.
  FashionMnistOptions from_config{.config_dir = dir.file("b"), .default_dir = dir.file("missing")};
  EXPECT_EQ(FashionMNIST::find_dir(S::kTest, from_config), dir.file("b"));
  EXPECT_EQ(FashionMNIST::test(from_config).size(), 3);
  // A directory the user named must hold the files: no silent fallback to another copy.
  FashionMnistOptions opts{
      .dir = dir.file("a"), .config_dir = dir.file("b"), .default_dir = dir.file("missing")};
  expect_error<IoError>([&] { FashionMNIST::find_dir(S::kTest, opts); },
                        {dir.file("a"), "explicit directory", "t10k-images-idx3-ubyte.gz"});
  // An explicit directory that holds the files wins over the config one.
  write_pair(dir.file("a/" + FashionMNIST::images_file(S::kTest)),
             dir.file("a/" + FashionMNIST::labels_file(S::kTest)), 2);
  EXPECT_EQ(FashionMNIST::test(opts).size(), 2);
  // Nothing given: every place looked at is listed.
  FashionMnistOptions none{.default_dir = dir.file("missing")};
  expect_error<IoError>(
      [&] { FashionMNIST::train(none); },
      {dir.file("missing"), "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"});
}

TEST(FashionMnist, RealFilesIfInstalled) {
  const std::string d = kFashionMnistDefaultDir;
  if (!std::filesystem::exists(d + "/train-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << d << " (apt-get install "
                 << "dataset-fashion-mnist)";
  }
  auto train = FashionMNIST::train();
  auto test = FashionMNIST::test({.layout = ImageLayout::kFlat});
  ASSERT_EQ(train.size(), 60000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.rows(), 28);
  EXPECT_EQ(train.cols(), 28);
  std::vector<int64_t> first = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(train.get_batch(first).y.to_vector<int64_t>(),
            (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(test.get_batch(first).y.to_vector<int64_t>(),
            (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  std::vector<int64_t> counts(10, 0);
  double sum = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    int64_t y = train.label(i);
    ASSERT_TRUE(y >= 0 && y < 10) << "label " << i << " = " << y;
    ++counts[size_t(y)];
    const uint8_t* p = train.pixels(i);
    for (int j = 0; j < 784; ++j) sum += p[j];
  }
  for (int64_t c : counts) EXPECT_EQ(c, 6000);
  // The default normalisation constants are this set's statistics.
  EXPECT_NEAR(sum / (60000.0 * 784 * 255), 0.2860, 1e-3);
  EXPECT_EQ(test.get_batch(first).x.shape(), (Shape{10, 784}));
  // Decoded once per process while in use: a second train() shares the bytes.
  EXPECT_EQ(FashionMNIST::train().pixels(0), train.pixels(0));
  // Batch assembly keeps up with the MLP's >20k samples/s with a wide margin (measured ~500k).
  Loader loader(train, {.batch = 64, .shuffle = true, .seed = 1});
  const auto t0 = std::chrono::steady_clock::now();
  int64_t n = 0;
  for (auto& [x, y] : loader) n += y.numel();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(n, 60000);
  EXPECT_GT(double(n) / secs, 20000.0) << "Loader over Fashion-MNIST: " << n / secs << " samples/s";
}

TEST(Synthetic, DeterministicAndIndependentOfThreads) {
  SyntheticOptions o{.num_samples = 300, .shape = {2, 5}, .num_classes = 3, .seed = 7};
  std::vector<int64_t> idx(300);
  for (int64_t i = 0; i < 300; ++i) idx[size_t(i)] = i;
  set_num_threads(1);
  Batch a = Synthetic(o).get_batch(idx);
  set_num_threads(0);
  Batch b = Synthetic(o).get_batch(idx);
  EXPECT_EQ(a.x.shape(), (Shape{300, 2, 5}));
  EXPECT_EQ(a.x.to_vector<float>(), b.x.to_vector<float>());
  EXPECT_EQ(a.y.to_vector<int64_t>(), b.y.to_vector<int64_t>());
  o.seed = 8;
  EXPECT_NE(Synthetic(o).get_batch(idx).x.to_vector<float>(), a.x.to_vector<float>());
  for (int64_t y : a.y.to_vector<int64_t>()) EXPECT_TRUE(y >= 0 && y < 3);
  std::vector<int64_t> one = {299};
  Batch c =
      Synthetic({.num_samples = 300, .shape = {2, 5}, .num_classes = 3, .seed = 7}).get_batch(one);
  EXPECT_EQ(c.y.item<int64_t>(), a.y.to_vector<int64_t>()[299]);
}

TEST(Synthetic, ClustersAreSeparable) {
  // Nearest class mean must classify well: the data is learnable, not noise.
  const int64_t n = 600, f = 16, k = 4;
  Synthetic ds({.num_samples = n, .shape = {f}, .num_classes = k, .seed = 3, .noise = 0.5f});
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  Batch b = ds.get_batch(idx);
  auto x = b.x.to_vector<float>();
  auto y = b.y.to_vector<int64_t>();
  std::vector<double> mean(size_t(k * f), 0.0), count(size_t(k), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    count[size_t(y[size_t(i)])] += 1;
    for (int64_t j = 0; j < f; ++j) mean[size_t(y[size_t(i)] * f + j)] += x[size_t(i * f + j)];
  }
  for (int64_t c = 0; c < k; ++c) {
    EXPECT_GT(count[size_t(c)], n / k / 2) << "class " << c << " is rare";
    for (int64_t j = 0; j < f; ++j) mean[size_t(c * f + j)] /= count[size_t(c)];
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double best_d = 1e30;
    for (int64_t c = 0; c < k; ++c) {
      double d = 0;
      for (int64_t j = 0; j < f; ++j)
        d += std::pow(x[size_t(i * f + j)] - mean[size_t(c * f + j)], 2);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == y[size_t(i)];
  }
  EXPECT_GT(correct, n * 95 / 100);
  expect_error<InvalidArgument>([] { Synthetic({.num_classes = 0}); }, {"num_classes 0"});
}

}  // namespace
}  // namespace cohort::data
