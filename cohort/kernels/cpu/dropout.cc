#include "cohort/kernels/cpu/dropout.h"

#include <algorithm>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"

namespace cohort::cpu {

void dropout_apply(const float* x, int64_t n, float p, uint64_t seed, float* y) {
  const Philox rng(seed);
  const float scale = 1.0f / (1.0f - p);
  // One Philox block gives the uniforms of elements 4b .. 4b+3 (as Philox::uniform does).
  const int64_t blocks = (n + 3) / 4;
  parallel_for(0, blocks, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const Philox::Block r = rng.block(uint64_t(b));
      const int64_t base = 4 * b, m = std::min<int64_t>(4, n - base);
      for (int64_t k = 0; k < m; ++k)
        y[base + k] = Philox::to_unit(r[size_t(k)]) >= p ? x[base + k] * scale : 0.0f;
    }
  });
}

}  // namespace cohort::cpu
