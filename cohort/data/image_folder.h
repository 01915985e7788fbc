#pragma once
// A labelled data set from a folder of images, one sub-folder per class, as
// torchvision.datasets.ImageFolder reads it:
//
//   root/cat/001.png
//   root/cat/002.jpg
//   root/dog/a.jpeg
//
// Classes are the sub-folders' names sorted (byte order, as Python's sorted()), the label of
// a class its index. A class folder's images are its .png, .jpg and .jpeg files (any case), in
// it and in its sub-folders (links followed), in the order torchvision walks them: folders by
// sorted path, each one's files sorted by name. Other files are ignored, and so is every name
// starting with '.' (.ipynb_checkpoints, macOS's ._ files, which are not images).
//
// Streaming: the constructor lists the files and decodes only the first image when it needs its
// size or channels; get_batch reads and decodes the images it is asked for (image_decode.h), so
// memory holds the list of paths, never the pixels of the data set. Samples come out as float32
// [channels, height, width] with values byte / 255, resized bilinearly to the data set's size
// when an image has another (image_decode.h states the conventions).
//
// Errors name the file or folder: a root that is missing or has no class folder, a class folder
// with no image, a class of an evaluation split that the training split lacks (options.classes);
// in get_batch, an image that cannot be read or decoded (its path and sample index).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/data/labeled.h"

namespace cohort::data {

struct ImageFolderOptions {
  std::string path;  // the root folder
  // Channels of a sample: 1 (luminance), 2 (luminance, alpha), 3 (RGB) or 4 (RGBA); 0 = from the
  // first image: 1 when it is gray (with or without alpha), else 3.
  int64_t channels = 0;
  // A sample's size; images of another size are resized to it. 0 and 0 = the first image's.
  int64_t height = 0;
  int64_t width = 0;
  Standardize standardize;  // applied to the values in [0, 1] (labeled.h)
  // Empty: the root's sub-folders are the classes. Otherwise these classes, labelled in this
  // order (an evaluation split takes the training split's): each sub-folder must be one of them,
  // and a class may have no folder here.
  std::vector<std::string> classes = {};
};

class ImageFolderDataset final : public LabeledDataset {
 public:
  explicit ImageFolderDataset(const ImageFolderOptions& options);

  int64_t size() const override;
  // x float32 [B, channels, height, width], y int64 [B]. Decodes the B images on the calling
  // thread; safe to call from several threads at once (it only reads shared state).
  Batch get_batch(std::span<const int64_t> indices) const override;
  const Shape& sample_shape() const override;  // {channels, height, width}
  int64_t num_classes() const override;        // classes().size()

  const std::vector<std::string>& classes() const;
  const std::string& file(int64_t index) const;  // the image's path
  int64_t label(int64_t index) const;
  const std::string& path() const;

  // The file list; public only so that helpers in the .cc can name it.
  struct Data;

 private:
  std::shared_ptr<const Data> data_;  // shared by copies: the list may be long
  Shape sample_shape_;
  float scale_ = 1.0f;  // 1 / std
  float bias_ = 0.0f;   // -mean / std
};

}  // namespace cohort::data
