#include "cohort/data/fashion_mnist.h"

#include <filesystem>
#include <map>
#include <mutex>

#include "cohort/core/logging.h"
#include "cohort/data/idx.h"

namespace cohort::data {

struct FashionMNIST::Data {
  std::string images_path;
  std::string labels_path;
  int64_t n = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // [n, rows, cols]
  std::vector<uint8_t> labels;  // [n]
};

namespace {

const char* split_name(FashionMNIST::Split split) {
  return split == FashionMNIST::Split::kTrain ? "train" : "test";
}

std::shared_ptr<const FashionMNIST::Data> load(const std::string& images_path,
                                               const std::string& labels_path) {
  IdxArray images = read_idx(images_path, IdxKind::kImages);
  IdxArray labels = read_idx(labels_path, IdxKind::kLabels);
  COHORT_CHECK_ARG(images.dims[0] == labels.dims[0], "image/label count mismatch: ", images_path,
                   " holds ", images.dims[0], " images but ", labels_path, " holds ",
                   labels.dims[0], " labels");
  for (size_t i = 0; i < labels.data.size(); ++i) {
    COHORT_CHECK_ARG(labels.data[i] < FashionMNIST::kNumClasses, labels_path, ": label ", i, " is ",
                     int(labels.data[i]), ", expected a class in [0, ", FashionMNIST::kNumClasses,
                     ")");
  }
  auto data = std::make_shared<FashionMNIST::Data>();
  data->images_path = images_path;
  data->labels_path = labels_path;
  data->n = images.dims[0];
  data->rows = images.dims[1];
  data->cols = images.dims[2];
  data->pixels = std::move(images.data);
  data->labels = std::move(labels.data);
  return data;
}

// Decoded files are shared while any dataset object uses them, so that ranks running as
// threads, or a train() called twice, decode the 47 MB once. Entries expire with their last user.
std::shared_ptr<const FashionMNIST::Data> load_cached(const std::string& images_path,
                                                      const std::string& labels_path) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::weak_ptr<const FashionMNIST::Data>>
      cache;
  std::error_code ec;
  auto key = std::make_pair(std::filesystem::weakly_canonical(images_path, ec).string(),
                            std::filesystem::weakly_canonical(labels_path, ec).string());
  std::lock_guard<std::mutex> lock(mu);  // held while loading: a second caller waits, not reloads
  if (auto hit = cache[key].lock()) return hit;
  auto data = load(images_path, labels_path);
  cache[key] = data;
  return data;
}

// `dir/name` if it exists, else `dir/name` without ".gz" if that exists (an unpacked download),
// else "".
std::string resolve(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::path(dir) / name;
  if (fs::is_regular_file(p, ec)) return p.string();
  fs::path plain = p;
  plain.replace_extension();
  if (fs::is_regular_file(plain, ec)) return plain.string();
  return "";
}

}  // namespace

std::string FashionMNIST::images_file(Split split) {
  return split == Split::kTrain ? "train-images-idx3-ubyte.gz" : "t10k-images-idx3-ubyte.gz";
}
std::string FashionMNIST::labels_file(Split split) {
  return split == Split::kTrain ? "train-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte.gz";
}

std::string FashionMNIST::find_dir(Split split, const FashionMnistOptions& options) {
  struct Candidate {
    const std::string& dir;
    const char* origin;
    bool user_given;
  };
  const Candidate candidates[] = {
      {options.dir, "explicit directory", true},
      {options.config_dir, "directory from config", true},
      {options.default_dir, "default, from Debian's dataset-fashion-mnist", false}};
  std::string looked;
  for (const auto& [dir, origin, user_given] : candidates) {
    if (dir.empty()) continue;
    std::string missing;
    for (const std::string& name : {images_file(split), labels_file(split)}) {
      if (resolve(dir, name).empty()) missing += (missing.empty() ? "" : ", ") + name;
    }
    if (missing.empty()) {
      if (!looked.empty()) log::warn("data", "FashionMNIST: using ", dir, " after ", looked);
      return dir;
    }
    looked += detail::str(looked.empty() ? "" : "; ", dir, " (", origin, "): missing ", missing);
    // A directory the user named must hold the data: silently training on another copy
    // would be worse than stopping.
    if (user_given) break;
  }
  throw IoError(detail::str("FashionMNIST ", split_name(split), " files not found; looked in ",
                            looked, ". Install dataset-fashion-mnist or pass the directory"));
}

namespace {
std::shared_ptr<const FashionMNIST::Data> load_split(FashionMNIST::Split split,
                                                     const FashionMnistOptions& options) {
  std::string dir = FashionMNIST::find_dir(split, options);
  return load_cached(resolve(dir, FashionMNIST::images_file(split)),
                     resolve(dir, FashionMNIST::labels_file(split)));
}
}  // namespace

FashionMNIST::FashionMNIST(Split split, const FashionMnistOptions& options)
    : FashionMNIST(load_split(split, options), options) {}

FashionMNIST FashionMNIST::train(const FashionMnistOptions& options) {
  return FashionMNIST(Split::kTrain, options);
}
FashionMNIST FashionMNIST::test(const FashionMnistOptions& options) {
  return FashionMNIST(Split::kTest, options);
}

FashionMNIST FashionMNIST::from_files(const std::string& images_path,
                                      const std::string& labels_path,
                                      const FashionMnistOptions& options) {
  return FashionMNIST(load_cached(images_path, labels_path), options);
}

FashionMNIST::FashionMNIST(std::shared_ptr<const Data> data, const FashionMnistOptions& options)
    : data_(std::move(data)), layout_(options.layout) {
  COHORT_CHECK_ARG(options.std > 0, "FashionMNIST: std must be > 0, got ", options.std);
  scale_ = 1.0f / (255.0f * options.std);
  bias_ = -options.mean / options.std;
}

int64_t FashionMNIST::size() const {
  return data_->n;
}
int64_t FashionMNIST::rows() const {
  return data_->rows;
}
int64_t FashionMNIST::cols() const {
  return data_->cols;
}
const std::string& FashionMNIST::images_path() const {
  return data_->images_path;
}
const uint8_t* FashionMNIST::pixels(int64_t i) const {
  COHORT_CHECK_ARG(i >= 0 && i < data_->n, "FashionMNIST: index ", i, " out of range [0, ",
                   data_->n, ")");
  return data_->pixels.data() + i * data_->rows * data_->cols;
}
int64_t FashionMNIST::label(int64_t i) const {
  COHORT_CHECK_ARG(i >= 0 && i < data_->n, "FashionMNIST: index ", i, " out of range [0, ",
                   data_->n, ")");
  return data_->labels[size_t(i)];
}

namespace {
// x[b, :] = src[indices[b], :] * scale + bias for B rows of `len` bytes: the whole cost of
// assembling an image batch, kept to one loop the compiler vectorises.
void normalise_rows(const uint8_t* src, int64_t len, std::span<const int64_t> indices, float scale,
                    float bias, float* __restrict dst) {
  for (int64_t idx : indices) {
    const uint8_t* __restrict row = src + idx * len;
    for (int64_t j = 0; j < len; ++j) dst[j] = float(row[j]) * scale + bias;
    dst += len;
  }
}
}  // namespace

Batch FashionMNIST::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, data_->n, "FashionMNIST");
  const int64_t b = int64_t(indices.size());
  const int64_t len = data_->rows * data_->cols;
  Shape xs = layout_ == ImageLayout::kFlat ? Shape{b, len} : Shape{b, 1, data_->rows, data_->cols};
  Batch out{empty(xs, DType::f32), empty({b}, DType::i64)};
  normalise_rows(data_->pixels.data(), len, indices, scale_, bias_, out.x.data<float>());
  int64_t* y = out.y.data<int64_t>();
  for (int64_t k = 0; k < b; ++k) y[k] = data_->labels[size_t(indices[k])];
  return out;
}

}  // namespace cohort::data
