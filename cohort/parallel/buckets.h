#pragma once
// Bucket assignment for DDP's gradient allreduce (pure functions; reducer.h uses them).
//
// Parameters are packed, in the order their gradients are expected to become ready, into
// buckets of at most `bucket_bytes` (the first bucket: `first_bucket_bytes`, small so that the
// first allreduce starts early in backward). A parameter larger than the cap gets a bucket of
// its own. Inside a bucket, parameter k's gradient lives at offsets[k] (in floats) of one flat
// f32 buffer, so one allreduce moves the whole bucket.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cohort::parallel {

struct BucketLayout {
  std::vector<size_t> params;   // parameter indices, in ready order
  std::vector<size_t> offsets;  // element offset of each parameter in the flat buffer
  size_t numel = 0;             // total elements
};

// order: parameter indices in expected ready order (each once); numels[i]: elements of
// parameter i (f32). Deterministic: depends only on its arguments.
std::vector<BucketLayout> assign_buckets(const std::vector<size_t>& order,
                                         const std::vector<int64_t>& numels,
                                         size_t first_bucket_bytes, size_t bucket_bytes);

}  // namespace cohort::parallel
