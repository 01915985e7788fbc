#include "cohort/data/concat.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::data {

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<const LabeledDataset>> parts,
                             std::vector<std::string> names)
    : parts_(std::move(parts)), names_(std::move(names)), offsets_{0} {
  COHORT_CHECK_ARG(!parts_.empty() && parts_.size() == names_.size(),
                   "ConcatDataset: needs one name per part and at least one part, got ",
                   parts_.size(), " parts and ", names_.size(), " names");
  for (size_t i = 0; i < parts_.size(); ++i) {
    COHORT_CHECK_ARG(parts_[i]->sample_shape() == parts_[0]->sample_shape(), names_[i],
                     " has samples of shape ", shape_str(parts_[i]->sample_shape()), " but ",
                     names_[0], " has ", shape_str(parts_[0]->sample_shape()),
                     ": every shard must hold samples of one shape");
    offsets_.push_back(offsets_.back() + parts_[i]->size());
    classes_ = std::max(classes_, parts_[i]->num_classes());
  }
}

// Each part is asked once, for the indices that fall in it, and its rows land at their places
// in the batch: the batch keeps the order of `indices`.
Batch ConcatDataset::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, size(), "ConcatDataset");
  std::vector<std::vector<int64_t>> local(parts_.size()), where(parts_.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t part =
        size_t(std::upper_bound(offsets_.begin(), offsets_.end(), indices[k]) - offsets_.begin()) -
        1;
    local[part].push_back(indices[k] - offsets_[part]);
    where[part].push_back(int64_t(k));
  }
  Batch out;
  for (size_t p = 0; p < parts_.size(); ++p) {
    if (local[p].empty()) continue;
    Batch b = parts_[p]->get_batch(local[p]);
    if (!out.x.defined()) {
      Shape xs = b.x.shape(), ys = b.y.shape();
      xs[0] = ys[0] = int64_t(indices.size());
      out.x = empty(xs, b.x.dtype());
      out.y = empty(ys, b.y.dtype());
    }
    const int64_t x_row = b.x.numel() / b.x.size(0) * int64_t(dtype_size(b.x.dtype()));
    const int64_t y_row = b.y.numel() / b.y.size(0) * int64_t(dtype_size(b.y.dtype()));
    for (size_t i = 0; i < where[p].size(); ++i) {
      std::copy_n(static_cast<const char*>(b.x.raw_data()) + int64_t(i) * x_row, x_row,
                  static_cast<char*>(out.x.raw_data()) + where[p][i] * x_row);
      std::copy_n(static_cast<const char*>(b.y.raw_data()) + int64_t(i) * y_row, y_row,
                  static_cast<char*>(out.y.raw_data()) + where[p][i] * y_row);
    }
  }
  return out;
}

}  // namespace cohort::data
