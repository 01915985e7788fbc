// ImageFolderDataset (cohort/data/image_folder.h): classes and samples in torchvision's order,
// batches decoded from the files on demand (a file changed or deleted after the data set was
// opened is what get_batch sees), sizes and channels from the first image or the options, and
// every malformed folder or file an error naming it.
#include "cohort/data/image_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <thread>

#include "cohort/core/error.h"
#include "tests/support/files.h"
#include "tests/support/image_files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using Floats = std::vector<float>;
using Labels = std::vector<int64_t>;
using Names = std::vector<std::string>;

class ImageFolderTest : public ::testing::Test {
 protected:
  // root/<rel>, its folders made, as a 2x2 PNG of one colour (channels = colour's size).
  std::string png(const std::string& rel, Bytes colour, int w = 2, int h = 2) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    const int channels = int(colour.size());
    testing::write_png8(p.string(), w, h, channels, testing::solid(w, h, std::move(colour)));
    return p.string();
  }
  ImageFolderOptions options(const fs::path& root) const {
    ImageFolderOptions o;
    o.path = root.string();
    return o;
  }
  ImageFolderOptions options() const { return options(root_); }
  testing::TempDir tmp_;
  const fs::path root_ = fs::path(tmp_.path()) / "train";
};

Batch all_of(const ImageFolderDataset& d) {
  std::vector<int64_t> idx(size_t(d.size()));
  std::iota(idx.begin(), idx.end(), 0);
  return d.get_batch(idx);
}

Floats values(const Tensor& t) {
  const float* p = t.data<float>();
  return Floats(p, p + t.numel());
}

Labels labels(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return Labels(p, p + t.numel());
}

TEST_F(ImageFolderTest, ClassesAreSortedFoldersAndSamplesFollowTorchvisionsOrder) {
  const std::string b2 = png("b_dog/2.PNG", {1}), b1 = png("b_dog/1.jpeg.png", {1});
  const std::string a = png("a_cat/x.png", {1}), up = png("Z_upper/z.png", {1});
  const std::string sub = png("a_cat/sub/0.png", {1}), top = png("a_cat/y.png", {1});
  testing::write_jpeg((root_ / "a_cat/w.JPG").string(), 2, 2, 1, testing::solid(2, 2, {9}));
  testing::write_bytes(root_ / "a_cat/notes.txt", "not an image");
  png(".ipynb_checkpoints/hidden.png", {1});      // hidden: no class
  png("a_cat/._x.png", {1});                      // hidden: no image
  testing::write_bytes(root_ / "stray.png", "");  // a file in the root: no class
  ImageFolderDataset d(options());
  EXPECT_EQ(d.classes(), Names({"Z_upper", "a_cat", "b_dog"}));  // byte order: 'Z' < 'a'
  EXPECT_EQ(d.num_classes(), 3);
  ASSERT_EQ(d.size(), 7);
  const Names want = {up, (root_ / "a_cat/w.JPG").string(), a, top, sub, b1, b2};
  for (int64_t i = 0; i < d.size(); ++i) EXPECT_EQ(d.file(i), want[size_t(i)]) << i;
  EXPECT_EQ(labels(all_of(d).y), Labels({0, 1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(d.label(6), 2);
  EXPECT_EQ(d.path(), root_.string());
}

TEST_F(ImageFolderTest, ValuesAreBytesOver255InChwWithChannelsFromTheFirstImage) {
  png("a/rgb.png", {10, 20, 30});
  png("b/gray.png", {40});
  ImageFolderDataset d(options());
  EXPECT_EQ(d.sample_shape(), Shape({3, 2, 2}));  // the first image is RGB
  const Batch b = all_of(d);
  EXPECT_EQ(b.x.shape(), Shape({2, 3, 2, 2}));
  Floats want;
  for (float v : {10, 20, 30}) want.insert(want.end(), 4, v / 255.0f);
  want.insert(want.end(), 12, 40 / 255.0f);  // gray replicated into R, G and B
  EXPECT_EQ(values(b.x), want);
  EXPECT_EQ(labels(b.y), Labels({0, 1}));
}

TEST_F(ImageFolderTest, AGrayFirstImageMakesOneChannelAndRgbBecomesLuminance) {
  png("a/gray.png", {40});
  png("b/red.png", {255, 0, 0});
  ImageFolderDataset d(options());
  EXPECT_EQ(d.sample_shape(), Shape({1, 2, 2}));
  Floats want(4, 40 / 255.0f);
  want.insert(want.end(), 4, 76 / 255.0f);  // PIL's convert("L") of pure red
  EXPECT_EQ(values(all_of(d).x), want);
  auto o = options();
  o.channels = 4;
  EXPECT_EQ(ImageFolderDataset(o).sample_shape(), Shape({4, 2, 2}));
}

TEST_F(ImageFolderTest, ImagesOfAnotherSizeAreResizedToTheFirstOrTheGivenSize) {
  png("a/first.png", {10}, 2, 2);
  const fs::path big = root_ / "b/big.png";
  fs::create_directories(big.parent_path());
  Bytes px;
  for (int i = 0; i < 16; ++i) px.push_back(uint8_t(i * 10));
  testing::write_png8(big.string(), 4, 4, 1, px);
  ImageFolderDataset d(options());
  EXPECT_EQ(d.sample_shape(), Shape({1, 2, 2}));
  const Floats v = values(d.get_batch(std::vector<int64_t>{1}).x);
  const Floats want = {25, 45, 105, 125};  // 4 -> 2: the mean of each 2x2 block
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(v[i], want[i] / 255.0f, 1e-6);
  auto o = options();
  o.height = 3;
  o.width = 5;
  o.channels = 3;
  ImageFolderDataset sized(o);
  EXPECT_EQ(sized.sample_shape(), Shape({3, 3, 5}));
  EXPECT_EQ(all_of(sized).x.shape(), Shape({2, 3, 3, 5}));
}

TEST_F(ImageFolderTest, StandardizeAppliesToTheScaledValues) {
  png("a/x.png", {51});
  auto o = options();
  o.standardize = {0.5f, 0.25f};
  ImageFolderDataset d(o);
  for (float v : values(all_of(d).x)) EXPECT_NEAR(v, (0.2f - 0.5f) / 0.25f, 1e-6);
  o.standardize = {0.0f, 0.0f};
  expect_error<InvalidArgument>([&] { ImageFolderDataset bad(o); }, {root_.string(), "std > 0"});
}

// The data set keeps paths, not pixels: what a batch holds is what the file holds when the
// batch is made, and a file gone by then is an error naming it and its index.
TEST_F(ImageFolderTest, BatchesDecodeTheFilesOnDemand) {
  png("a/0.png", {10});
  const std::string second = png("a/1.png", {20});
  png("b/2.png", {30});
  ImageFolderDataset d(options());
  png("a/1.png", {99});  // rewritten after opening: the batch sees the new pixels
  EXPECT_EQ(values(d.get_batch(std::vector<int64_t>{1}).x), Floats(4, 99 / 255.0f));
  fs::remove(second);
  expect_error<IoError>(
      [&] {
        d.get_batch(std::vector<int64_t>{0, 1});
      },
      {"image folder " + root_.string(), "sample 1", second, "cannot open"});
  EXPECT_EQ(values(d.get_batch(std::vector<int64_t>{2, 0}).x)[0], 30 / 255.0f);
}

TEST_F(ImageFolderTest, BatchesFromSeveralThreadsAtOnceAgree) {
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 5; ++i) {
      // (GCC 12 warns, wrongly, of overlapping copies on "c" + to_string(c) + ...)
      const std::string name = detail::str("c", c, "/", i, ".png");
      png(name, {uint8_t(c * 50 + i), uint8_t(i), 7}, 5, 3);
    }
  }
  ImageFolderDataset d(options());
  const Floats want = values(all_of(d).x);
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 10; ++r) same[size_t(t)] += values(all_of(d).x) == want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(same, std::vector<int>(4, 10));
}

TEST_F(ImageFolderTest, AnEvaluationSplitTakesTheTrainingClassesAndRefusesOthers) {
  png("a/x.png", {1});
  png("b/x.png", {1});
  png("c/x.png", {1});
  const fs::path test = fs::path(tmp_.path()) / "test";
  for (const char* c : {"a", "c"}) {
    fs::create_directories(test / c);
    testing::write_png8((test / c / "1.png").string(), 2, 2, 1, testing::solid(2, 2, {1}));
  }
  testing::write_png8((test / "b.png").string(), 1, 1, 1, {0});  // a file, not a class folder
  ImageFolderDataset train(options());
  auto o = options(test);
  o.classes = train.classes();
  ImageFolderDataset eval(o);  // no b/ here: its label stays 1, c's 2
  EXPECT_EQ(eval.classes(), Names({"a", "b", "c"}));
  EXPECT_EQ(labels(all_of(eval).y), Labels({0, 2}));
  EXPECT_EQ(eval.num_classes(), 3);
  fs::create_directories(test / "zebra");
  testing::write_png8((test / "zebra/1.png").string(), 1, 1, 1, {0});
  expect_error<InvalidArgument>([&] { ImageFolderDataset bad(o); },
                                {test.string(), "class folder 'zebra'", (test / "zebra").string(),
                                 "not a class of the training split", "a, b, c"});
  o.classes = {"a", "b", "a"};
  expect_error<InvalidArgument>([&] { ImageFolderDataset bad(o); }, {"names a class twice"});
}

TEST_F(ImageFolderTest, FoldersWithoutImagesAreErrorsNamingThem) {
  expect_error<IoError>([&] { ImageFolderDataset d(options()); },
                        {root_.string(), "does not exist"});
  fs::create_directories(root_);
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(options()); },
                                {root_.string(), "has no class folders", "one sub-folder per"});
  testing::write_png8((root_ / "loose.png").string(), 1, 1, 1, {0});
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(options()); },
                                {"has no class folders", "holds 1 images directly"});
  png("a/x.png", {1});
  fs::create_directories(root_ / "b/sub");
  testing::write_bytes(root_ / "b/readme.txt", "no images here");
  expect_error<InvalidArgument>(
      [&] { ImageFolderDataset d(options()); },
      {"class folder " + (root_ / "b").string(), "holds no image", ".png, .jpg or .jpeg"});
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(options(root_ / "loose.png")); },
                                {(root_ / "loose.png").string(), "is not a folder"});
}

TEST_F(ImageFolderTest, BadImagesAreErrorsNamingTheFileAndIndex) {
  png("a/0.png", {1});
  testing::write_bytes(root_ / "a/1.png", "text, not a png");
  const std::string cut = png("b/2.png", {1, 2, 3}, 16, 16);
  const std::string bytes = testing::read_bytes(cut);
  testing::write_bytes(cut, bytes.substr(0, bytes.size() - 30));
  ImageFolderDataset d(options());  // only the first image is decoded here
  expect_error<InvalidArgument>([&] { d.get_batch(std::vector<int64_t>{1}); },
                                {"sample 1", (root_ / "a/1.png").string(), "not a PNG or JPEG"});
  expect_error<IoError>(
      [&] {
        d.get_batch(std::vector<int64_t>{0, 2});
      },
      {"sample 2", cut, "cut short"});
  // The first image sets the shape, so the constructor reads it and names it when it is bad.
  testing::write_bytes(root_ / "a/0.png", "");
  expect_error<InvalidArgument>([&] { ImageFolderDataset bad(options()); },
                                {"sample 0", (root_ / "a/0.png").string(), "the file is empty"});
  expect_error<InvalidArgument>([&] { d.get_batch(std::vector<int64_t>{3}); }, {"out of range"});
}

TEST_F(ImageFolderTest, BadOptionsSayWhatIsExpected) {
  png("a/x.png", {1});
  auto o = options();
  o.channels = 5;
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(o); }, {"channels 5", "3 (RGB)"});
  o = options();
  o.height = 4;
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(o); }, {"size 4 x 0", "both 0"});
  o = options();
  o.path = "";
  expect_error<InvalidArgument>([&] { ImageFolderDataset d(o); }, {"no path given"});
}

}  // namespace
}  // namespace cohort::data
