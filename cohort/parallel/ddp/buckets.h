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
// parameter i (f32). groups[i] (optional: empty means every parameter alone): parameters whose
// gradients become ready together (one layer's weight and bias come out of one backward node).
// A run of one group in `order` is not split across buckets when it fits in one: a bucket that
// took a layer's small bias but not its weight would wait for that layer's whole backward.
// Deterministic: depends only on its arguments.
std::vector<BucketLayout> assign_buckets(const std::vector<size_t>& order,
                                         const std::vector<int64_t>& numels,
                                         size_t first_bucket_bytes, size_t bucket_bytes,
                                         const std::vector<int>& groups = {});

}  // namespace cohort::parallel
