#pragma once
// The source offset of a row-major linear index in a strided view (strided_copy.cu;
// tests/cuda/strided_math_test.cc).
#include "cohort/kernels/cuda/device_math.h"

namespace cohort::cuda::math {

// ---- strided gather: the source offset of a row-major linear index ---------------------------

constexpr int kMaxStridedDims = 8;

// A view's shape and strides (in elements), passed by value to a kernel (no device memory).
struct StridedView {
  int ndim = 0;
  int64_t shape[kMaxStridedDims] = {};
  int64_t strides[kMaxStridedDims] = {};
};

// The same view in the fewest dims (host only): size-1 dims dropped, and a dim merged into the
// one inside it when stride[d] == stride[d + 1] * shape[d + 1], so every linear index has the
// same offset and the kernel divides less. A contiguous view becomes {numel} with stride 1; a
// single element becomes 0 dims. Requires ndim <= kMaxStridedDims and no dim of size 0.
inline StridedView make_strided_view(const int64_t* shape, const int64_t* strides, int ndim) {
  StridedView v;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    const int last = v.ndim - 1;
    if (last >= 0 && v.strides[last] == strides[d] * shape[d]) {
      v.shape[last] *= shape[d];
      v.strides[last] = strides[d];
    } else {
      v.shape[v.ndim] = shape[d];
      v.strides[v.ndim] = strides[d];
      ++v.ndim;
    }
  }
  return v;
}

// The offset of row-major linear index `linear` (sum of index[d] * strides[d]), peeling dims
// from the innermost. I is int64_t, or int32_t where the host checked strided_fits_int32 (32-bit
// division is several times cheaper on a GPU). The loop has a fixed trip count so that, unrolled
// in a kernel, it indexes the by-value view with constants.
template <typename I>
COHORT_HD I strided_offset(const StridedView& v, I linear) {
  I off = 0;
  COHORT_UNROLL
  for (int d = kMaxStridedDims - 1; d >= 0; --d) {
    if (d >= v.ndim) continue;
    const I size = I(v.shape[d]);
    const I q = linear / size;
    off += (linear - q * size) * I(v.strides[d]);
    linear = q;
  }
  return off;
}

// Whether every linear index below numel and every offset of the view fit in int32 (strides are
// non-negative, so the largest offset is that of the last element).
inline bool strided_fits_int32(const StridedView& v, int64_t numel) {
  int64_t max_offset = 0;
  for (int d = 0; d < v.ndim; ++d) max_offset += (v.shape[d] - 1) * v.strides[d];
  return numel <= INT32_MAX && max_offset <= INT32_MAX;
}

}  // namespace cohort::cuda::math
