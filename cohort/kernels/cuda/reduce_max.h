#pragma once
// Max over a middle dim on device pointers, float32: the counterparts of cpu::max_middle and
// cpu::max_middle_backward (kernels/cpu/reduce.h) with the same arguments plus the stream.
// Asynchronous on `stream`; a bad launch throws CudaError. No atomics: each output is one
// thread's or one block's, and its candidates merge under math::argmax_beats, a total order, so
// the result is the CPU's (first maximal position, a NaN counts as the maximum) whatever the
// launch shape.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort::cuda {

// x [outer, r, inner] -> val [outer, inner] = max over r, and idx [outer, inner] (may be null)
// = the first position along r holding it (the first NaN where there is one). r == 0 writes
// nothing, as on the CPU.
void max_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* val, int64_t* idx,
                cudaStream_t stream);

// g [outer, inner], idx [outer, inner] -> dx [outer, r, inner]: g at the position idx chose,
// zero elsewhere (every element of dx written once: no memset, no scatter).
void max_middle_backward(const float* g, const int64_t* idx, int64_t outer, int64_t r,
                         int64_t inner, float* dx, cudaStream_t stream);

}  // namespace cohort::cuda
