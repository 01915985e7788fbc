#pragma once
// Fashion-MNIST (Xiao et al. 2017): 28x28 grey images in 10 classes, 60000 train / 10000 test.
//
// The files come from Debian's dataset-fashion-mnist, under /usr/share/datasets/fashion-mnist.
// They are decoded once into memory as uint8 (47 MB for train) and shared by every copy of the
// dataset object; get_batch normalises rows straight into the output tensor.
#include <memory>
#include <string>
#include <vector>

#include "cohort/data/dataset.h"

namespace cohort::data {

inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

enum class ImageLayout {
  kNCHW,  // x [B, 1, rows, cols] (CNNs)
  kFlat,  // x [B, rows * cols] (MLPs)
};

struct FashionMnistOptions {
  // Where to look, in order: `dir` (an explicit argument), `config_dir` (the caller's config),
  // then `default_dir`. Empty entries are skipped; the first holding both files wins.
  std::string dir = "";
  std::string config_dir = "";
  std::string default_dir = kFashionMnistDefaultDir;
  // x = (pixel / 255 - mean) / std. The defaults are the training set's statistics.
  float mean = 0.2860f;
  float std = 0.3530f;
  ImageLayout layout = ImageLayout::kNCHW;
};

class FashionMNIST final : public Dataset {
 public:
  enum class Split { kTrain, kTest };
  static constexpr int64_t kNumClasses = 10;

  static FashionMNIST train(const FashionMnistOptions& options = {});
  static FashionMNIST test(const FashionMnistOptions& options = {});
  FashionMNIST(Split split, const FashionMnistOptions& options = {});
  // Any pair of IDX files in the same format (MNIST, or test fixtures).
  static FashionMNIST from_files(const std::string& images_path, const std::string& labels_path,
                                 const FashionMnistOptions& options = {});

  // The first directory among the options' candidates that holds both files of `split`.
  // Throws IoError listing every place looked at and what was missing there.
  static std::string find_dir(Split split, const FashionMnistOptions& options);
  static std::string images_file(Split split);  // "train-images-idx3-ubyte.gz"
  static std::string labels_file(Split split);

  int64_t size() const override;
  // x float32 [B, 1, rows, cols] or [B, rows * cols]; y int64 [B].
  Batch get_batch(std::span<const int64_t> indices) const override;

  int64_t rows() const;
  int64_t cols() const;
  const uint8_t* pixels(int64_t i) const;  // rows * cols raw bytes of sample i
  int64_t label(int64_t i) const;
  const std::string& images_path() const;

  // Decoded file contents; public only so that the loader cache in the .cc can name it.
  struct Data;

 private:
  FashionMNIST(std::shared_ptr<const Data> data, const FashionMnistOptions& options);
  std::shared_ptr<const Data> data_;
  float scale_;  // 1 / (255 std)
  float bias_;   // -mean / std
  ImageLayout layout_;
};

}  // namespace cohort::data
