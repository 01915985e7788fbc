#include "cohort/parallel/ddp/buckets.h"

#include "cohort/core/error.h"

namespace cohort::parallel {

namespace {

// The bytes of the run of group `groups[order[k]]` that starts at position k of `order`.
size_t run_bytes(const std::vector<size_t>& order, const std::vector<int64_t>& numels,
                 const std::vector<int>& groups, size_t k) {
  size_t bytes = 0;
  for (size_t j = k; j < order.size() && groups[order[j]] == groups[order[k]]; ++j)
    bytes += size_t(numels[order[j]]) * sizeof(float);
  return bytes;
}

}  // namespace

std::vector<BucketLayout> assign_buckets(const std::vector<size_t>& order,
                                         const std::vector<int64_t>& numels,
                                         size_t first_bucket_bytes, size_t bucket_bytes,
                                         const std::vector<int>& groups) {
  COHORT_CHECK_ARG(groups.empty() || groups.size() == numels.size(), "DDP: ", groups.size(),
                   " bucket groups for ", numels.size(), " parameters");
  COHORT_CHECK_ARG(bucket_bytes > 0 && first_bucket_bytes > 0,
                   "DDP: bucket_bytes and first_bucket_bytes must be > 0, got ", bucket_bytes,
                   " and ", first_bucket_bytes);
  std::vector<BucketLayout> buckets;
  BucketLayout cur;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t p = order[k];
    COHORT_INTERNAL(p < numels.size(), "bucket order names parameter ", p, " of ", numels.size());
    size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    size_t bytes = size_t(numels[p]) * sizeof(float);
    // A group's run starts here: it goes whole into the next bucket if it fits one but not what
    // is left of this one.
    const bool run_starts = !groups.empty() && (k == 0 || groups[order[k - 1]] != groups[p]);
    if (run_starts) {
      const size_t run = run_bytes(order, numels, groups, k);
      if (run <= bucket_bytes && run > bytes) bytes = run;
    }
    // Close the open bucket when this parameter (or its group) would overflow it (never leave
    // one empty).
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
