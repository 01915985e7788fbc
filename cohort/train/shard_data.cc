#include "cohort/train/shard_data.h"

#include <algorithm>
#include <filesystem>

#include "cohort/core/logging.h"
#include "cohort/data/concat.h"
#include "cohort/train/components.h"
#include "cohort/train/world.h"

namespace cohort::train {
namespace fs = std::filesystem;

namespace {

bool shard_has_suffix(const fs::path& p, const char* suffix) {
  return p.extension() == suffix;
}

bool is_npy_pair_dir(const fs::path& p) {
  return fs::is_directory(p) && fs::exists(p / "x.npy") && fs::exists(p / "y.npy");
}

}  // namespace

std::vector<std::string> shard_files(const std::string& dataset, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  const bool csv = dataset == "csv";
  if (!csv && is_npy_pair_dir(dir)) return {};  // one data set in x.npy and y.npy
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    const bool shard =
        csv ? e.is_regular_file() && shard_has_suffix(p, ".csv")
            : (e.is_regular_file() && shard_has_suffix(p, ".npz")) || is_npy_pair_dir(p);
    if (shard) files.push_back(p.string());
  }
  COHORT_CHECK_IO(!ec, "cannot list data.path '", dir, "': ", ec.message());
  COHORT_CHECK_ARG(!files.empty(), "config: data.path '", dir, "' is a directory without ",
                   csv ? "any .csv file" : "x.npy and y.npy, .npz files or such sub-directories",
                   " (a shard directory holds one file per shard, docs/data.md)");
  std::sort(files.begin(), files.end());
  return files;
}

std::shared_ptr<const data::LabeledDataset> open_my_shards(
    const std::string& dir, const std::vector<std::string>& files, ShardPick pick,
    const std::function<std::shared_ptr<const data::LabeledDataset>(const std::string&)>& open) {
  COHORT_CHECK_ARG(int64_t(files.size()) >= pick.workers, "config: data.path '", dir, "' holds ",
                   files.size(), " shard(s) for ", pick.workers,
                   " workers: every worker needs one of its own (split the data into at least ",
                   pick.workers, " files, or train with fewer workers)");
  std::vector<std::shared_ptr<const data::LabeledDataset>> parts;
  std::vector<std::string> names;
  for (size_t i = size_t(pick.rank); i < files.size(); i += size_t(pick.workers)) {
    parts.push_back(open(files[i]));
    names.push_back(files[i]);
  }
  std::string mine;
  for (const std::string& n : names)
    mine += (mine.empty() ? "" : ", ") + fs::path(n).filename().string();
  log::info("data", "shards of this worker: ", mine, " (", names.size(), " of ", files.size(),
            " in ", dir, ")");
  return std::make_shared<data::ConcatDataset>(std::move(parts), std::move(names));
}

void agree_on_shards(DataSplits& d, const TrainWorld& world) {
  if (!d.sharded) return;
  COHORT_CHECK_ARG(world.size == 1 || world.distributed(), "config: data.path is a shard ",
                   "directory, split between the workers; parallel.strategy must be one whose "
                   "workers train in lockstep (ddp, zero, local_sgd, gossip), not the parameter "
                   "server's independent workers");
  // {-samples, classes}: one MAX gives the smallest share and the largest class count.
  double v[2] = {-double(d.train->size()), double(d.inputs.classes)};
  if (world.distributed())
    world.group->allreduce(
        {.output = v, .count = 2, .dtype = comm::DType::f64, .op = comm::ReduceOp::max});
  d.samples_per_worker = int64_t(-v[0]);
  d.inputs.classes = int64_t(v[1]);
  log::info("data", "shards: this worker reads ", d.train->size(), " samples of its own; ",
            d.samples_per_worker, " per epoch on every worker (the smallest share)");
}

}  // namespace cohort::train
