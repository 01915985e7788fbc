#include "cohort/kernels/cuda/reduce.h"

#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/column_sums.cuh"
#include "cohort/kernels/cuda/runtime.h"

namespace cohort::cuda {
namespace {

// x [rows, r] -> out [rows]: one block per row (blockIdx.x strides over rows when the grid is
// capped), per-thread double sums combined by detail::block_reduce.
__global__ void row_sums_kernel(const float* x, int64_t rows, int64_t r, float* out) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* p = x + row * r;
    double part = 0;
    for (int64_t i = threadIdx.x; i < r; i += blockDim.x) part += p[i];
    const double total = detail::block_reduce(part, detail::Add{});
    if (threadIdx.x == 0) out[row] = float(total);
  }
}

// The addend of x [batches, rows, cols] at (b, r, j), as the first of column_sums_kernel's two.
struct MiddleAddend {
  const float* x;
  int64_t rows, cols;
  __device__ float2 operator()(int64_t b, int64_t r, int64_t j) const {
    return make_float2(x[(b * rows + r) * cols + j], 0.f);
  }
};

// y [rows, cols] = bias [cols] broadcast, a grid stride over the elements.
__global__ void fill_rows_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x)
    y[k] = bias[k % cols];
}

void column_sums(const float* x, int64_t batches, int64_t rows, int64_t cols, float* out,
                 cudaStream_t stream) {
  detail::column_sums_kernel<<<detail::column_sums_grid(batches, cols), detail::column_sums_block(),
                               0, stream>>>(batches, rows, cols, MiddleAddend{x, rows, cols}, out,
                                            nullptr);
}

}  // namespace

void sum_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* out,
                cudaStream_t stream) {
  if (outer <= 0 || inner <= 0) return;
  if (inner == 1) {
    // r == 0 still launches: every row sums to 0.
    row_sums_kernel<<<detail::row_blocks(outer), detail::row_threads(r), 0, stream>>>(x, outer, r,
                                                                                      out);
  } else {
    column_sums(x, outer, r, inner, out, stream);
  }
  COHORT_CUDA_CHECK_LAUNCH("sum_middle");
}

void sum_rows(const float* g, int64_t rows, int64_t cols, float* out, cudaStream_t stream) {
  if (cols <= 0) return;
  column_sums(g, 1, rows, cols, out, stream);
  COHORT_CUDA_CHECK_LAUNCH("sum_rows");
}

void fill_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  constexpr unsigned kThreads = 256;
  fill_rows_kernel<<<blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, bias, rows, cols);
  COHORT_CUDA_CHECK_LAUNCH("fill_rows");
}

}  // namespace cohort::cuda
