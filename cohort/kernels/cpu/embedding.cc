#include "cohort/kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "cohort/core/thread_pool.h"
#include "cohort/kernels/cpu/simd.h"

namespace cohort::cpu {

void embedding_forward(const float* weight, int64_t d, const int64_t* idx, int64_t n, float* out) {
  parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t i = lo; i < hi; ++i)
                   std::memcpy(out + i * d, weight + idx[i] * d, size_t(d) * sizeof(float));
               });
}

namespace {
COHORT_SIMD_CLONES void scatter_cols(const float* dout, const int64_t* idx, int64_t n, int64_t d,
                                     int64_t lo, int64_t hi, float* dweight) {
  for (int64_t i = 0; i < n; ++i) {
    float* __restrict dst = dweight + idx[i] * d;
    const float* __restrict src = dout + i * d;
    for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
  }
}
}  // namespace

void embedding_backward(const float* dout, const int64_t* idx, int64_t n, int64_t v, int64_t d,
                        float* dweight) {
  std::memset(dweight, 0, size_t(v * d) * sizeof(float));
  parallel_for(0, d, std::max<int64_t>(64, 16384 / std::max<int64_t>(n, 1)),
               [&](int64_t lo, int64_t hi) { scatter_cols(dout, idx, n, d, lo, hi, dweight); });
}

}  // namespace cohort::cpu
