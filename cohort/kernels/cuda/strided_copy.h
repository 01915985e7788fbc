#pragma once
// The gather behind Tensor::contiguous() on the GPU: a strided view of device memory written
// out in row-major order. Asynchronous on `stream`; a bad launch throws CudaError, bad arguments
// (more than 8 dims, an element size other than 1, 2, 4, 8) throw InvalidArgument.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cohort::cuda {

// dst [prod(shape)] (contiguous) = src viewed with (shape, strides), both in elements, starting
// `src_offset_elems` elements into src: dst[k] = src[src_offset_elems + sum_d index_d(k) *
// strides[d]] for the row-major index of k. `shape` and `strides` are host arrays of `ndim`
// (0 to 8) entries; strides are non-negative (0 broadcasts). Elements are copied as bits, so
// any dtype of 1, 2, 4 or 8 bytes works; src and dst are aligned to elem_size.
void strided_copy(const void* src, int64_t src_offset_elems, const int64_t* shape,
                  const int64_t* strides, int ndim, size_t elem_size, void* dst,
                  cudaStream_t stream);

// The other direction: dst viewed with (shape, strides), starting `dst_offset_elems` elements
// into dst, receives src [prod(shape)] (contiguous) in row-major order (a slice's backward writes
// the gradient into its window of a zeroed tensor this way). Every stride of a dim longer than 1
// must be positive: two elements written to one place would race (InvalidArgument otherwise).
void strided_scatter(const void* src, const int64_t* shape, const int64_t* strides, int ndim,
                     size_t elem_size, void* dst, int64_t dst_offset_elems, cudaStream_t stream);

}  // namespace cohort::cuda
