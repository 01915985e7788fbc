#pragma once
// Several labelled data sets as one, samples numbered shard after shard: one worker's shards of a
// shard directory (data.path a directory of files, docs/data.md), opened by that worker only.
#include <memory>
#include <string>
#include <vector>

#include "cohort/data/labeled.h"

namespace cohort::data {

class ConcatDataset final : public LabeledDataset {
 public:
  // `names` name the parts in errors (their files). Parts whose sample shapes differ are an
  // InvalidArgument naming both files and shapes; an empty list is one too.
  ConcatDataset(std::vector<std::shared_ptr<const LabeledDataset>> parts,
                std::vector<std::string> names);
  int64_t size() const override { return offsets_.back(); }
  Batch get_batch(std::span<const int64_t> indices) const override;
  const Shape& sample_shape() const override { return parts_.front()->sample_shape(); }
  int64_t num_classes() const override { return classes_; }  // the largest part's

 private:
  std::vector<std::shared_ptr<const LabeledDataset>> parts_;
  std::vector<std::string> names_;
  std::vector<int64_t> offsets_;  // offsets_[i]: the first index of part i; back(): the total
  int64_t classes_ = 0;
};

}  // namespace cohort::data
