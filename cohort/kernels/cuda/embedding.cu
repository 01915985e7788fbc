#include "cohort/kernels/cuda/embedding.h"

#include <algorithm>

#include "cohort/kernels/cuda/runtime.h"

namespace cohort::cuda {
namespace {

constexpr unsigned kThreads = 256;
// embedding_backward's block: 32 columns (a warp: coalesced row reads) x 8 vocabulary slices;
// kTile indices are staged in shared memory at a time, one per thread.
constexpr unsigned kCols = 32, kSlicesPerBlock = 8, kTile = kCols * kSlicesPerBlock;
constexpr int64_t kTargetThreads = 1 << 16;  // enough threads in flight to hide the latency

// An index in [0, limit): one unsigned compare (a negative index wraps to a huge value).
__device__ __forceinline__ bool in_range(int64_t u, int64_t lo, uint64_t width) {
  return uint64_t(u) - uint64_t(lo) < width;
}

// weight [v, d], idx [n] -> out [n, d], a grid stride over the n * d elements.
__global__ void forward_kernel(const float* weight, int64_t v, int64_t d, const int64_t* idx,
                               int64_t n, float* out) {
  const int64_t total = n * d;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / d, j = k - i * d, u = idx[i];
    out[k] = in_range(u, 0, uint64_t(v)) ? weight[u * d + j] : 0.f;
  }
}

// dout [n, d], idx [n] -> dweight [v, d]. Block (kCols, kSlicesPerBlock), grid (column tiles,
// slice blocks). Thread (tx, ty) owns column j = kCols * blockIdx.x + tx of vocabulary rows
// [lo, lo + chunk) of slice kSlicesPerBlock * blockIdx.y + ty: it alone writes those elements,
// in index order, so no atomics are needed and the sums are the CPU's (see embedding.h).
__global__ void backward_kernel(const float* dout, const int64_t* idx, int64_t n, int64_t v,
                                int64_t d, int64_t chunk, float* dweight) {
  __shared__ int64_t tile[kTile];
  const unsigned tx = threadIdx.x, ty = threadIdx.y, t = ty * kCols + tx;
  const int64_t j = int64_t(blockIdx.x) * kCols + tx;
  const int64_t lo = (int64_t(blockIdx.y) * kSlicesPerBlock + ty) * chunk;
  const int64_t hi = lo + chunk < v ? lo + chunk : v;
  const uint64_t width = hi > lo ? uint64_t(hi - lo) : 0;
  const bool active = j < d;  // threads past d still stage indices and synchronise
  if (active)
    for (int64_t u = lo; u < hi; ++u) dweight[u * d + j] = 0.f;
  for (int64_t base = 0; base < n; base += kTile) {
    const int64_t m = n - base < kTile ? n - base : kTile;
    if (t < m) tile[t] = idx[base + t];
    __syncthreads();
    if (active) {
      for (int64_t k = 0; k < m; ++k) {
        const int64_t u = tile[k];
        if (in_range(u, lo, width)) dweight[u * d + j] += dout[(base + k) * d + j];
      }
    }
    // The tile is restaged only after every thread has walked it.
    __syncthreads();
  }
}

__global__ void set_kernel(int64_t* p, int64_t value) {
  *p = value;
}

// *first = min over positions i of idx [n] outside [0, limit); set to n beforehand.
__global__ void out_of_range_kernel(const int64_t* idx, int64_t n, int64_t limit,
                                    unsigned long long* first) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    if (!in_range(idx[i], 0, uint64_t(limit))) atomicMin(first, (unsigned long long)i);
}

}  // namespace

void embedding_forward(const float* weight, int64_t v, int64_t d, const int64_t* idx, int64_t n,
                       float* out, cudaStream_t stream) {
  if (n <= 0 || d <= 0) return;
  forward_kernel<<<blocks_for(n * d, kThreads), kThreads, 0, stream>>>(
      weight, std::max<int64_t>(v, 0), d, idx, n, out);
  COHORT_CUDA_CHECK_LAUNCH("embedding_forward");
}

void embedding_backward(const float* dout, const int64_t* idx, int64_t n, int64_t v, int64_t d,
                        float* dweight, cudaStream_t stream) {
  if (v <= 0 || d <= 0) return;
  const int64_t col_blocks = (d + kCols - 1) / kCols;
  // Slices: about kTargetThreads threads in all, no more slices than rows, a grid's y limit.
  int64_t slice_blocks = kTargetThreads / (col_blocks * kCols * kSlicesPerBlock);
  const int64_t most = std::min<int64_t>(65535, (v + kSlicesPerBlock - 1) / kSlicesPerBlock);
  slice_blocks = std::max<int64_t>(1, std::min(slice_blocks, most));
  const int64_t slices = slice_blocks * kSlicesPerBlock;
  const int64_t chunk = (v + slices - 1) / slices;
  const dim3 grid{unsigned(col_blocks), unsigned(slice_blocks)}, block{kCols, kSlicesPerBlock};
  backward_kernel<<<grid, block, 0, stream>>>(dout, idx, n, v, d, chunk, dweight);
  COHORT_CUDA_CHECK_LAUNCH("embedding_backward");
}

void first_out_of_range(const int64_t* idx, int64_t n, int64_t limit, int64_t* first,
                        cudaStream_t stream) {
  set_kernel<<<1, 1, 0, stream>>>(first, n < 0 ? 0 : n);
  COHORT_CUDA_CHECK_LAUNCH("first_out_of_range (set)");
  if (n <= 0) return;
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  out_of_range_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      idx, n, std::max<int64_t>(limit, 0), reinterpret_cast<unsigned long long*>(first));
  COHORT_CUDA_CHECK_LAUNCH("first_out_of_range");
}

}  // namespace cohort::cuda
