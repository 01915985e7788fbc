#pragma once
// The dataset interface the Loader pulls batches from.
//
// A dataset is an indexable collection of samples. The Loader asks for whole batches (a list of
// indices) rather than single samples so that a dataset can assemble a batch in one tight loop
// straight into the output tensor: no per-sample Tensor, no per-sample allocation.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cohort/tensor/tensor.h"

namespace cohort::data {

// One batch of B samples. x holds the inputs: float32 features or images ([B, ...]), or int64
// token ids for text ([B, T]). y holds int64 targets: class labels [B] or next tokens [B, T].
struct Batch {
  Tensor x;
  Tensor y;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Samples indices[0], indices[1], ... stacked along dim 0. Called from the Loader's prefetch
  // thread, so implementations must be safe to call concurrently (they only read).
  virtual Batch get_batch(std::span<const int64_t> indices) const = 0;
};

// Samples [begin, end) of another dataset, renumbered from 0: a held-out split of one draw.
class Subset final : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end);
  int64_t size() const override { return end_ - begin_; }
  Batch get_batch(std::span<const int64_t> indices) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t begin_, end_;
};

// The samples of another dataset named by an index list, renumbered from 0 in list order: one
// federated client's share, or any split that is not a contiguous range. Indices may repeat
// (a bootstrap draw); each is checked against the base once, here, so get_batch only checks the
// positions it is handed.
class IndexSubset final : public Dataset {
 public:
  IndexSubset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return int64_t(indices_.size()); }
  Batch get_batch(std::span<const int64_t> indices) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// Throws InvalidArgument naming `what` when an index is outside [0, size) or the list is empty.
void check_batch_indices(std::span<const int64_t> indices, int64_t size, const std::string& what);

}  // namespace cohort::data
