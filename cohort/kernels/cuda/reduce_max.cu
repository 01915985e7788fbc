#include "cohort/kernels/cuda/argmax_math.h"
#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/reduce_max.h"
#include "cohort/kernels/cuda/runtime.h"

// Two launch shapes, as for the sums (reduce.cu): rows (inner == 1) get one block each, whose
// threads scan strided pieces and merge them with block_reduce; columns (inner > 1) get tiles of
// 32 columns of one outer slice, kRowGroups threads per column scanning every kRowGroups-th row,
// merged in shared memory. Each thread scans its positions in increasing order, so argmax_add
// keeps the first of equal values; the merges then pick by the same total order.
namespace cohort::cuda {
namespace {

constexpr unsigned kColTile = 32, kRowGroups = 8, kThreads = 256;

struct Merge {
  __device__ __forceinline__ math::ArgMax operator()(math::ArgMax a, math::ArgMax b) const {
    return math::argmax_merge(a, b);
  }
};

// x [rows, r] -> val, idx [rows]. Block (row_threads(r)); blocks stride over rows.
__global__ void row_max_kernel(const float* x, int64_t rows, int64_t r, float* val, int64_t* idx) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* p = x + row * r;
    math::ArgMax a;
    for (int64_t j = threadIdx.x; j < r; j += blockDim.x) a = math::argmax_add(a, p[j], j);
    a = detail::block_reduce(a, Merge{});
    if (threadIdx.x == 0) {
      val[row] = a.val;
      if (idx) idx[row] = a.idx;
    }
  }
}

// x [outer, r, inner] -> val, idx [outer, inner]. Block (kColTile, kRowGroups): thread (tx, ty)
// scans rows ty, ty + kRowGroups, ... of column 32 * blockIdx.x + tx (a warp reads 32
// consecutive floats of one row); then ty == 0 merges the kRowGroups candidates.
// Grid (column tiles, outer slices capped at 65535; blocks stride over the rest).
__global__ void col_max_kernel(const float* x, int64_t outer, int64_t r, int64_t inner, float* val,
                               int64_t* idx) {
  // Plain arrays: a __shared__ ArgMax would need its (non-trivial) default initialiser.
  __shared__ float part_val[kRowGroups][kColTile];
  __shared__ int64_t part_idx[kRowGroups][kColTile];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = int64_t(blockIdx.x) * kColTile + tx;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    math::ArgMax a;
    if (i < inner) {
      const float* p = x + o * r * inner + i;
      for (int64_t j = ty; j < r; j += kRowGroups) a = math::argmax_add(a, p[j * inner], j);
    }
    part_val[ty][tx] = a.val;
    part_idx[ty][tx] = a.idx;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (unsigned g = 1; g < kRowGroups; ++g)
        a = math::argmax_merge(a, math::ArgMax{part_val[g][tx], part_idx[g][tx]});
      val[o * inner + i] = a.val;
      if (idx) idx[o * inner + i] = a.idx;
    }
    // The next slice rewrites the parts only after ty == 0 has read them.
    __syncthreads();
  }
}

// g, idx [outer, inner] -> dx [outer, r, inner], one thread per element of dx.
__global__ void max_backward_kernel(const float* g, const int64_t* idx, int64_t outer, int64_t r,
                                    int64_t inner, float* dx) {
  const int64_t total = outer * r * inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    const int64_t i = k % inner, oj = k / inner;
    const int64_t j = oj % r, o = oj / r;
    const int64_t at = o * inner + i;
    dx[k] = idx[at] == j ? g[at] : 0.0f;
  }
}

void launch_rows(const float* x, int64_t rows, int64_t r, float* val, int64_t* idx,
                 cudaStream_t stream) {
  row_max_kernel<<<detail::row_blocks(rows), detail::row_threads(r), 0, stream>>>(x, rows, r, val,
                                                                                  idx);
}

void launch_cols(const float* x, int64_t outer, int64_t r, int64_t inner, float* val, int64_t* idx,
                 cudaStream_t stream) {
  const int64_t tiles = (inner + kColTile - 1) / kColTile;
  const dim3 grid(unsigned(tiles), unsigned(outer < 65535 ? outer : 65535));
  col_max_kernel<<<grid, dim3(kColTile, kRowGroups), 0, stream>>>(x, outer, r, inner, val, idx);
}

}  // namespace

void max_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* val, int64_t* idx,
                cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || r <= 0) return;
  if (inner == 1)
    launch_rows(x, outer, r, val, idx, stream);
  else
    launch_cols(x, outer, r, inner, val, idx, stream);
  COHORT_CUDA_CHECK_LAUNCH("max_middle");
}

void max_middle_backward(const float* g, const int64_t* idx, int64_t outer, int64_t r,
                         int64_t inner, float* dx, cudaStream_t stream) {
  const int64_t total = outer * r * inner;
  if (outer <= 0 || inner <= 0 || r <= 0) return;
  max_backward_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(g, idx, outer, r, inner,
                                                                            dx);
  COHORT_CUDA_CHECK_LAUNCH("max_middle_backward");
}

}  // namespace cohort::cuda
