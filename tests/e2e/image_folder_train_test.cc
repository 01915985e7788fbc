// data.dataset = "image_folder" through `cohort train` (docs/data.md): a folder of red and blue
// PNGs (one sub-folder per class) trains the CNN (resized by data.image_size) and the MLP (on
// luminance, data.channels = 1) with 2 workers, against a JPEG test folder or a held-out share;
// a missing path, a test class the training folder lacks and an unreadable image are errors
// naming what to fix.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/e2e/run_cli.h"
#include "tests/support/files.h"
#include "tests/support/image_files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_cli;

// 8x8 images, `count` per class: "blue" mostly blue, "red" mostly red, every pixel noisy.
void write_folder(const fs::path& root, int count, bool jpeg, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1;
  auto noise = [&] {
    state = state * 1664525u + 1013904223u;
    return uint8_t(state >> 26);  // 0 .. 63
  };
  for (const char* cls : {"blue", "red"}) {
    fs::create_directories(root / cls);
    const bool red = cls[0] == 'r';
    for (int i = 0; i < count; ++i) {
      std::vector<uint8_t> px;
      for (int p = 0; p < 64; ++p) {
        px.insert(px.end(), {uint8_t((red ? 180 : 0) + noise()), noise(),
                             uint8_t((red ? 0 : 180) + noise())});
      }
      const std::string file =
          (root / cls / (std::to_string(i) + (jpeg ? ".jpg" : ".png"))).string();
      if (jpeg) {
        testing::write_jpeg(file, 8, 8, 3, px, 90);
      } else {
        testing::write_png8(file, 8, 8, 3, px);
      }
    }
  }
}

class ImageFolderTrain : public ::testing::Test {
 protected:
  std::string train(const std::string& sets) {
    return "train " COHORT_SOURCE_DIR
           "/examples/fashion_mlp.toml --set data.dataset=image_folder --set run.progress=none "
           "--set optim.lr=0.1 --set train.epochs=3 --set data.batch_size=8 --set run.dir=" +
           (dir_ / "runs").string() + " " + sets;
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

double final_accuracy(const std::string& out) {
  const size_t at = out.rfind("accuracy ");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 9);
}

TEST_F(ImageFolderTrain, TheCnnTrainsOnResizedImagesWithTwoWorkersAgainstAJpegTestFolder) {
  write_folder(dir_ / "train", 48, false, 1);
  write_folder(dir_ / "test", 16, true, 2);
  auto r = run_cli(
      train("--workers 2 --set model.type=cnn --set data.image_size=[12,12] --set "
            "data.path=" +
            (dir_ / "train").string() + " --set data.eval_path=" + (dir_ / "test").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "eval (test)")) << r.output;
  EXPECT_GT(final_accuracy(r.output), 90.0) << r.output;
}

TEST_F(ImageFolderTrain, TheMlpTrainsOnLuminanceWithAHeldOutShareOfEachClass) {
  write_folder(dir_ / "train", 48, false, 1);
  auto r =
      run_cli(train("--workers 2 --set model.type=mlp --set model.hidden=[16] --set "
                    "data.channels=1 --set data.path=" +
                    (dir_ / "train").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "mlp, 1074 parameters")) << r.output;  // 64*16+16 + 16*2+2
  EXPECT_TRUE(contains(r, "eval (validation)")) << r.output;
  // The held-out tenth has both colours: a split at the end would be "red" only.
  EXPECT_GT(final_accuracy(r.output), 90.0) << r.output;
}

TEST_F(ImageFolderTrain, ConfigAndFileErrorsSayWhatToFix) {
  auto r = run_cli(train(""));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "data.dataset = \"image_folder\" needs data.path")) << r.output;
  write_folder(dir_ / "train", 4, false, 1);
  write_folder(dir_ / "test", 2, false, 2);
  fs::rename(dir_ / "test/red", dir_ / "test/green");
  const std::string paths = " --set data.path=" + (dir_ / "train").string() +
                            " --set data.eval_path=" + (dir_ / "test").string();
  r = run_cli(train("--set model.type=mlp" + paths));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "class folder 'green'")) << r.output;
  EXPECT_TRUE(contains(r, "not a class of the training split, whose classes are: blue, red"))
      << r.output;
  fs::remove_all(dir_ / "test");
  testing::write_bytes(dir_ / "train/red/3.png", "not a png");
  r = run_cli(train("--set model.type=mlp --set data.batch_size=2 --set data.path=" +
                    (dir_ / "train").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, (dir_ / "train/red/3.png").string() + ": not a PNG or JPEG image"))
      << r.output;
  r = run_cli(train("--set data.image_size=[12] --set data.path=" + (dir_ / "train").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "data.image_size [12]: expected [height, width]")) << r.output;
}

}  // namespace
}  // namespace cohort
