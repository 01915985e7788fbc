#include "cohort/kernels/cuda/runtime.h"
#include "cohort/kernels/cuda/strided_copy.h"
#include "cohort/kernels/cuda/strided_math.h"

// One thread per output element in a grid-stride loop: dst is written in order (coalesced), and
// src is read at math::strided_offset of the linear index, the host-tested formula. The host
// first merges the view's dims (math::make_strided_view), so a contiguous view is one memcpy and
// a transpose or a slice with steps divides once or twice per element; where every index and
// offset fits in int32 the divisions are 32-bit.
namespace cohort::cuda {
namespace {

constexpr unsigned kThreads = 256;

// src (already advanced by the offset) viewed with `view` -> dst [n]. T is an unsigned integer
// of the element's size: the copy moves bits. `view` is a kernel argument (constant bank).
template <typename T, typename I>
__global__ void strided_copy_kernel(const T* __restrict__ src, math::StridedView view, int64_t n,
                                    T* __restrict__ dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    dst[k] = src[math::strided_offset<I>(view, I(k))];
}

// src [n] -> dst (already advanced by the offset) viewed with `view`: the gather's mirror.
template <typename T, typename I>
__global__ void strided_scatter_kernel(const T* __restrict__ src, math::StridedView view, int64_t n,
                                       T* __restrict__ dst) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride)
    dst[math::strided_offset<I>(view, I(k))] = src[k];
}

template <typename T>
void launch_scatter(const void* src, const math::StridedView& view, int64_t n, void* dst,
                    int64_t dst_offset, cudaStream_t stream) {
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst) + dst_offset;
  const unsigned blocks = blocks_for(n, kThreads);
  if (math::strided_fits_int32(view, n))
    strided_scatter_kernel<T, int32_t><<<blocks, kThreads, 0, stream>>>(s, view, n, d);
  else
    strided_scatter_kernel<T, int64_t><<<blocks, kThreads, 0, stream>>>(s, view, n, d);
}

template <typename T>
void launch(const void* src, int64_t src_offset, const math::StridedView& view, int64_t n,
            void* dst, cudaStream_t stream) {
  const T* s = static_cast<const T*>(src) + src_offset;
  T* d = static_cast<T*>(dst);
  const unsigned blocks = blocks_for(n, kThreads);
  if (math::strided_fits_int32(view, n))
    strided_copy_kernel<T, int32_t><<<blocks, kThreads, 0, stream>>>(s, view, n, d);
  else
    strided_copy_kernel<T, int64_t><<<blocks, kThreads, 0, stream>>>(s, view, n, d);
}

// A view that reads its elements in order: one device-to-device copy.
bool is_contiguous(const math::StridedView& v) {
  return v.ndim == 0 || (v.ndim == 1 && v.strides[0] == 1);
}

}  // namespace

void strided_copy(const void* src, int64_t src_offset_elems, const int64_t* shape,
                  const int64_t* strides, int ndim, size_t elem_size, void* dst,
                  cudaStream_t stream) {
  COHORT_CHECK_ARG(ndim >= 0 && ndim <= math::kMaxStridedDims, "strided_copy: ", ndim,
                   " dims, at most ", math::kMaxStridedDims);
  COHORT_CHECK_ARG(elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8,
                   "strided_copy: elements of ", elem_size, " bytes (1, 2, 4 or 8)");
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  if (n == 0) return;
  const math::StridedView view = math::make_strided_view(shape, strides, ndim);
  if (is_contiguous(view)) {
    const char* s = static_cast<const char*>(src) + src_offset_elems * int64_t(elem_size);
    COHORT_CUDA_CHECK(
        cudaMemcpyAsync(dst, s, size_t(n) * elem_size, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  switch (elem_size) {
    case 1:
      launch<uint8_t>(src, src_offset_elems, view, n, dst, stream);
      break;
    case 2:
      launch<uint16_t>(src, src_offset_elems, view, n, dst, stream);
      break;
    case 4:
      launch<uint32_t>(src, src_offset_elems, view, n, dst, stream);
      break;
    default:
      launch<uint64_t>(src, src_offset_elems, view, n, dst, stream);
  }
  COHORT_CUDA_CHECK_LAUNCH("strided_copy");
}

void strided_scatter(const void* src, const int64_t* shape, const int64_t* strides, int ndim,
                     size_t elem_size, void* dst, int64_t dst_offset_elems, cudaStream_t stream) {
  COHORT_CHECK_ARG(ndim >= 0 && ndim <= math::kMaxStridedDims, "strided_scatter: ", ndim,
                   " dims, at most ", math::kMaxStridedDims);
  COHORT_CHECK_ARG(elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8,
                   "strided_scatter: elements of ", elem_size, " bytes (1, 2, 4 or 8)");
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    COHORT_CHECK_ARG(shape[d] <= 1 || strides[d] > 0, "strided_scatter: dim ", d, " of size ",
                     shape[d], " has stride ", strides[d],
                     " (a destination element would be written twice)");
    n *= shape[d];
  }
  if (n == 0) return;
  const math::StridedView view = math::make_strided_view(shape, strides, ndim);
  if (is_contiguous(view)) {
    char* d = static_cast<char*>(dst) + dst_offset_elems * int64_t(elem_size);
    COHORT_CUDA_CHECK(
        cudaMemcpyAsync(d, src, size_t(n) * elem_size, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  switch (elem_size) {
    case 1:
      launch_scatter<uint8_t>(src, view, n, dst, dst_offset_elems, stream);
      break;
    case 2:
      launch_scatter<uint16_t>(src, view, n, dst, dst_offset_elems, stream);
      break;
    case 4:
      launch_scatter<uint32_t>(src, view, n, dst, dst_offset_elems, stream);
      break;
    default:
      launch_scatter<uint64_t>(src, view, n, dst, dst_offset_elems, stream);
  }
  COHORT_CUDA_CHECK_LAUNCH("strided_scatter");
}

}  // namespace cohort::cuda
