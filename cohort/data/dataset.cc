#include "cohort/data/dataset.h"

namespace cohort::data {

void check_batch_indices(std::span<const int64_t> indices, int64_t size, const std::string& what) {
  COHORT_CHECK_ARG(!indices.empty(), what, ": get_batch called with no indices");
  for (size_t k = 0; k < indices.size(); ++k) {
    COHORT_CHECK_ARG(indices[k] >= 0 && indices[k] < size, what, ": index ", indices[k],
                     " (position ", k, " in the batch) is out of range [0, ", size, ")");
  }
}

Subset::Subset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end)
    : base_(std::move(base)), begin_(begin), end_(end) {
  COHORT_CHECK_ARG(0 <= begin && begin <= end && end <= base_->size(), "Subset: range [", begin,
                   ", ", end, ") does not fit a dataset of ", base_->size(), " samples");
}

Batch Subset::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, size(), "Subset");
  std::vector<int64_t> shifted(indices.begin(), indices.end());
  for (int64_t& i : shifted) i += begin_;
  return base_->get_batch(shifted);
}

IndexSubset::IndexSubset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  COHORT_CHECK_ARG(base_ != nullptr, "IndexSubset: the base dataset is null");
  const int64_t n = base_->size();
  for (size_t k = 0; k < indices_.size(); ++k) {
    COHORT_CHECK_ARG(indices_[k] >= 0 && indices_[k] < n, "IndexSubset: index ", indices_[k],
                     " (position ", k, " of the list) is out of range [0, ", n,
                     ") of the base dataset");
  }
}

Batch IndexSubset::get_batch(std::span<const int64_t> indices) const {
  check_batch_indices(indices, size(), "IndexSubset");
  std::vector<int64_t> mapped(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) mapped[k] = indices_[size_t(indices[k])];
  return base_->get_batch(mapped);
}

}  // namespace cohort::data
