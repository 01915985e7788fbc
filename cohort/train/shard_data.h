#pragma once
// Shard directories (docs/data.md, "Shard directories"): data.path a directory of files that
// together are the training set, dealt to the workers by name, round-robin: worker r of W opens
// shards r, r + W, r + 2W, ... and never reads another's. The workers then step in lockstep on
// the smallest share (agree_on_shards), each shuffling its own samples every epoch.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/data/labeled.h"

namespace cohort::train {

struct DataSplits;  // components.h
struct TrainWorld;  // world.h

// Which worker opens which shards: rank `rank` of `workers`.
struct ShardPick {
  int rank = 0;
  int workers = 1;
};

// The shard files of `dir` for data.dataset = `dataset`, sorted by name: `*.csv` for csv; for
// numpy, `*.npz` files and sub-directories holding x.npy and y.npy. Empty when `dir` is not a
// directory, or (numpy) is one data set itself (x.npy and y.npy in it).
std::vector<std::string> shard_files(const std::string& dataset, const std::string& dir);

// The shards of `files` that `pick` owns, opened with `open` and joined. Fewer shards than
// workers is an InvalidArgument naming the directory and both counts.
std::shared_ptr<const data::LabeledDataset> open_my_shards(
    const std::string& dir, const std::vector<std::string>& files, ShardPick pick,
    const std::function<std::shared_ptr<const data::LabeledDataset>(const std::string&)>& open);

// Collective over the workers' group: the samples each trains per epoch (the smallest share)
// into d.samples_per_worker, and the classes the largest of every worker's (so that every
// replica of the model has the same head). A job whose workers form no group (parameter-server
// workers) with more than one worker is refused: nothing would keep their steps in lockstep.
void agree_on_shards(DataSplits& d, const TrainWorld& world);

}  // namespace cohort::train
