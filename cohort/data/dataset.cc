#include "cohort/data/dataset.h"

namespace cohort::data {

void check_batch_indices(std::span<const int64_t> indices, int64_t size, const std::string& what) {
  COHORT_CHECK_ARG(!indices.empty(), what, ": get_batch called with no indices");
  for (size_t k = 0; k < indices.size(); ++k) {
    COHORT_CHECK_ARG(indices[k] >= 0 && indices[k] < size, what, ": index ", indices[k],
                     " (position ", k, " in the batch) is out of range [0, ", size, ")");
  }
}

}  // namespace cohort::data
