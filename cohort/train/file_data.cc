// data.dataset = "csv" and "numpy": a user's own files as training and evaluation splits, and
// the model's inputs (sample shape, classes) read from them (docs/data.md).
#include <algorithm>

#include "cohort/data/csv.h"
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

}  // namespace

DataSplits make_file_data(const Config& cfg) {
  const bool csv = cfg.get_string("data.dataset") == "csv";
  const std::string& path = cfg.get_string("data.path");
  const std::string& eval_path = cfg.get_string("data.eval_path");
  COHORT_CHECK_ARG(!path.empty(), "config: data.dataset = \"", cfg.get_string("data.dataset"),
                   "\" needs data.path (",
                   csv ? "a .csv file" : "a .npz, or a directory with x.npy and y.npy", ")");
  auto open = [&](const std::string& p) { return csv ? open_csv(cfg, p) : open_numpy(cfg, p); };
  std::shared_ptr<const data::LabeledDataset> train = open(path), eval;
  DataSplits d;
  d.eval_name = "test";
  if (!eval_path.empty()) {
    eval = open(eval_path);
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
  const int64_t n = train->size();
  const int64_t held =
      std::max<int64_t>(1, int64_t(double(n) * cfg.get_float("data.val_fraction")));
  COHORT_CHECK_ARG(n > held, "config: ", path, " has ", n,
                   " samples: too few to hold out data.val_fraction for validation; give "
                   "data.eval_path");
  d.train = std::make_shared<data::Subset>(train, 0, n - held);
  d.eval = std::make_shared<data::Subset>(train, n - held, n);
  d.eval_name = "validation";
  return d;
}

}  // namespace cohort::train
