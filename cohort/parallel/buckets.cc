#include "cohort/parallel/buckets.h"

#include "cohort/core/error.h"

namespace cohort::parallel {

std::vector<BucketLayout> assign_buckets(const std::vector<size_t>& order,
                                         const std::vector<int64_t>& numels,
                                         size_t first_bucket_bytes, size_t bucket_bytes) {
  COHORT_CHECK_ARG(bucket_bytes > 0 && first_bucket_bytes > 0,
                   "DDP: bucket_bytes and first_bucket_bytes must be > 0, got ", bucket_bytes,
                   " and ", first_bucket_bytes);
  std::vector<BucketLayout> buckets;
  BucketLayout cur;
  for (size_t p : order) {
    COHORT_INTERNAL(p < numels.size(), "bucket order names parameter ", p, " of ", numels.size());
    size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    size_t bytes = size_t(numels[p]) * sizeof(float);
    // Close the open bucket when this parameter would overflow it (never leave one empty).
    if (!cur.params.empty() && (cur.numel * sizeof(float) + bytes > cap)) {
      buckets.push_back(std::move(cur));
      cur = BucketLayout{};
    }
    cur.params.push_back(p);
    cur.offsets.push_back(cur.numel);
    cur.numel += size_t(numels[p]);
  }
  if (!cur.params.empty()) buckets.push_back(std::move(cur));
  return buckets;
}

}  // namespace cohort::parallel
