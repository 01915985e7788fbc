// data.dataset = "csv", "numpy" and "image_folder": a user's own files as training and
// evaluation splits, and the model's inputs (sample shape, classes) read from them
// (docs/data.md).
#include <algorithm>

#include "cohort/data/csv.h"
#include "cohort/data/image_folder.h"
#include "cohort/data/numpy.h"
#include "cohort/train/components.h"

namespace cohort::train {
namespace {

// data.mean / data.std apply to files only when set (their defaults are Fashion-MNIST's).
data::Standardize standardize(const Config& cfg) {
  if (!cfg.is_set("data.mean") && !cfg.is_set("data.std")) return {};
  return {float(cfg.get_float("data.mean")), float(cfg.get_float("data.std"))};
}

std::shared_ptr<const data::LabeledDataset> open_csv(const Config& cfg, const std::string& path) {
  data::CsvOptions o;
  o.path = path;
  o.label_column = cfg.get_string("data.label_column");
  o.header = cfg.get_string("data.header");
  o.standardize = standardize(cfg);
  return std::make_shared<data::CsvDataset>(o);
}

std::shared_ptr<const data::LabeledDataset> open_numpy(const Config& cfg, const std::string& path,
                                                       const std::string& x = "x",
                                                       const std::string& y = "y") {
  data::NumpyOptions o;
  o.path = path;
  o.x_key = x;
  o.y_key = y;
  o.standardize = standardize(cfg);
  return std::make_shared<data::NumpyDataset>(o);
}

// The evaluation folder (train given) takes the training folder's classes, channels and size,
// so that its labels and samples mean what the training split's do.
std::shared_ptr<const data::ImageFolderDataset> open_images(
    const Config& cfg, const std::string& path, const data::ImageFolderDataset* train = nullptr) {
  data::ImageFolderOptions o;
  o.path = path;
  o.standardize = standardize(cfg);
  if (train != nullptr) {
    o.classes = train->classes();
    o.channels = train->sample_shape()[0];
    o.height = train->sample_shape()[1];
    o.width = train->sample_shape()[2];
    return std::make_shared<data::ImageFolderDataset>(o);
  }
  o.channels = cfg.get_int("data.channels");
  const std::vector<int64_t>& size = cfg.get_int_list("data.image_size");
  COHORT_CHECK_ARG(size.empty() || size.size() == 2, "config: data.image_size ", shape_str(size),
                   ": expected [height, width], or [] for the first image's size");
  if (!size.empty()) {
    o.height = size[0];
    o.width = size[1];
  }
  return std::make_shared<data::ImageFolderDataset>(o);
}

bool is_npz(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0;
}

// data.shape when set (its product must be the file's), else the file's own sample shape.
Shape sample_shape(const Config& cfg, const data::LabeledDataset& train, const std::string& path) {
  const std::vector<int64_t>& want = cfg.get_int_list("data.shape");
  const Shape& have = train.sample_shape();
  if (want.empty()) return have;
  int64_t a = 1, b = 1;
  for (int64_t d : want) a *= d;
  for (int64_t d : have) b *= d;
  COHORT_CHECK_ARG(a == b, "config: data.shape ", shape_str(want), " has ", a,
                   " values per sample but ", path, " has ", b, " (", shape_str(have), ")");
  return want;
}

// How many of n samples data.val_fraction holds out (at least 1, fewer than n).
int64_t held_out(const Config& cfg, int64_t n, const std::string& path) {
  const int64_t held =
      std::max<int64_t>(1, int64_t(double(n) * cfg.get_float("data.val_fraction")));
  COHORT_CHECK_ARG(n > held, "config: ", path, " has ", n,
                   " samples: too few to hold out data.val_fraction for validation; give "
                   "data.eval_path");
  return held;
}

// An image folder's samples are sorted by class, so its last rows would be its last class: the
// held-out samples are spread evenly instead (sample i when floor((i + 1) held / n) steps up),
// and every class gives its share.
DataSplits image_folder_data(const Config& cfg, const std::string& path,
                             const std::string& eval_path) {
  std::shared_ptr<const data::ImageFolderDataset> train = open_images(cfg, path);
  DataSplits d;
  d.inputs = {sample_shape(cfg, *train, path), train->num_classes()};
  if (!eval_path.empty()) {
    d.train = train;
    d.eval = open_images(cfg, eval_path, train.get());
    d.eval_name = "test";
    return d;
  }
  const int64_t n = train->size(), held = held_out(cfg, n, path);
  std::vector<int64_t> keep, hold;
  for (int64_t i = 0; i < n; ++i) ((i + 1) * held / n > i * held / n ? hold : keep).push_back(i);
  d.train = std::make_shared<data::IndexSubset>(train, std::move(keep));
  d.eval = std::make_shared<data::IndexSubset>(train, std::move(hold));
  d.eval_name = "validation";
  return d;
}

const char* path_hint(const std::string& dataset) {
  if (dataset == "csv") return "a .csv file";
  if (dataset == "numpy") return "a .npz, or a directory with x.npy and y.npy";
  return "a folder holding one sub-folder of images per class";
}

}  // namespace

DataSplits make_file_data(const Config& cfg, ShardPick pick) {
  const std::string& dataset = cfg.get_string("data.dataset");
  const bool csv = dataset == "csv";
  const std::string& path = cfg.get_string("data.path");
  const std::string& eval_path = cfg.get_string("data.eval_path");
  COHORT_CHECK_ARG(!path.empty(), "config: data.dataset = \"", dataset, "\" needs data.path (",
                   path_hint(dataset), ")");
  if (dataset == "image_folder") return image_folder_data(cfg, path, eval_path);
  auto open = [&](const std::string& p) { return csv ? open_csv(cfg, p) : open_numpy(cfg, p); };
  // A shard directory: this worker opens its own shards; the evaluation split is read whole.
  const std::vector<std::string> shards = shard_files(dataset, path);
  COHORT_CHECK_ARG(shards.empty() || !eval_path.empty(), "config: data.path '", path,
                   "' is a shard directory: give the evaluation split in data.eval_path (a file, "
                   "or a shard directory that every worker reads whole)");
  std::shared_ptr<const data::LabeledDataset> train =
      shards.empty() ? open(path) : open_my_shards(path, shards, pick, open);
  std::shared_ptr<const data::LabeledDataset> eval;
  DataSplits d;
  d.sharded = !shards.empty();
  d.eval_name = "test";
  if (!eval_path.empty()) {
    const std::vector<std::string> eval_shards = shard_files(dataset, eval_path);
    eval = eval_shards.empty() ? open(eval_path) : open_my_shards(eval_path, eval_shards, {}, open);
  } else if (!csv && is_npz(path) && data::npz_has(path, "x_test")) {
    eval = open_numpy(cfg, path, "x_test", "y_test");
  }
  d.inputs = {sample_shape(cfg, *train, path), train->num_classes()};
  if (eval) {
    COHORT_CHECK_ARG(eval->sample_shape() == train->sample_shape(), "config: the evaluation split ",
                     eval_path.empty() ? path + " (x_test)" : eval_path, " has samples of shape ",
                     shape_str(eval->sample_shape()), " but the training split ",
                     shape_str(train->sample_shape()));
    d.inputs.classes = std::max(d.inputs.classes, eval->num_classes());
    d.train = train;
    d.eval = eval;
    return d;
  }
  // No test split: the last data.val_fraction of the training rows, held out.
  const int64_t n = train->size(), held = held_out(cfg, n, path);
  d.train = std::make_shared<data::Subset>(train, 0, n - held);
  d.eval = std::make_shared<data::Subset>(train, n - held, n);
  d.eval_name = "validation";
  return d;
}

}  // namespace cohort::train
