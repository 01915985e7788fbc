#pragma once
// Dropout with a counter-based mask: element i is kept when Philox(seed).uniform(i) >= p.
// The mask depends only on (seed, i), so forward and backward regenerate it instead of storing
// it, and any thread count gives the same result.
#include <cstdint>

namespace cohort::cpu {

// y [n] = x [n] * keep_i / (1 - p). Backward is the same call on the gradient.
void dropout_apply(const float* x, int64_t n, float p, uint64_t seed, float* y);

}  // namespace cohort::cpu
