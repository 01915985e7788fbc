#include "cohort/kernels/cuda/softmax.h"

#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/device_math.h"
#include "cohort/kernels/cuda/runtime.h"

// One block per row (blockIdx.x strides over rows when the grid is capped); the block's threads
// stride along the row, each keeping a partial statistic, which detail::block_reduce combines.
// Every thread of a block walks the same rows, so the __syncthreads inside block_reduce are
// reached by all of them.
namespace cohort::cuda {
namespace {

struct Merge {
  __device__ math::SoftmaxState operator()(math::SoftmaxState a, math::SoftmaxState b) const {
    return math::softmax_merge(a, b);
  }
};

// The row's (max, sum of exp(x - max)), known to every thread of the block.
__device__ math::SoftmaxState row_softmax_state(const float* xr, int64_t cols) {
  math::SoftmaxState s;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s = math::softmax_add(s, xr[i]);
  return detail::block_reduce(s, Merge{});
}

// x, y [rows, cols]: y = exp(x - m) * (1 / sum), as the CPU scales by the reciprocal.
__global__ void softmax_kernel(const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const math::SoftmaxState s = row_softmax_state(xr, cols);
    const float inv = 1.f / s.sum;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - s.max) * inv;
  }
}

// x, y [rows, cols]: y = (x - m) - log(sum): the exact shift first, as the CPU.
__global__ void log_softmax_kernel(const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const math::SoftmaxState s = row_softmax_state(xr, cols);
    const float ls = logf(s.sum);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = (xr[i] - s.max) - ls;
  }
}

// y, g, dx [rows, cols]: dx = y * (g - sum(g * y)).
__global__ void softmax_backward_kernel(const float* y, const float* g, int64_t rows, int64_t cols,
                                        float* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *yr = y + r * cols, *gr = g + r * cols;
    float* dr = dx + r * cols;
    float part = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) part += gr[i] * yr[i];
    const float dot = detail::block_reduce(part, detail::Add{});
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dr[i] = yr[i] * (gr[i] - dot);
  }
}

// y, g, dx [rows, cols]: dx = g - exp(y) * sum(g).
__global__ void log_softmax_backward_kernel(const float* y, const float* g, int64_t rows,
                                            int64_t cols, float* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *yr = y + r * cols, *gr = g + r * cols;
    float* dr = dx + r * cols;
    float part = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) part += gr[i];
    const float sum = detail::block_reduce(part, detail::Add{});
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) dr[i] = gr[i] - expf(yr[i]) * sum;
  }
}

// logits [n, c] -> stats [n, 2] = (m, log sum exp(x - m)) per row.
__global__ void ce_stats_kernel(const float* x, int64_t n, int64_t c, float* stats) {
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const math::SoftmaxState s = row_softmax_state(x + r * c, c);
    if (threadIdx.x == 0) {
      stats[2 * r] = s.max;
      stats[2 * r + 1] = logf(s.sum);
    }
  }
}

// One block: *loss = sum over rows of (m - x_t) + lse in double, each thread adding rows
// threadIdx.x, + blockDim.x, ... in order, then the block's fixed tree. A target outside
// [0, c) makes its term NaN without reading logits.
__global__ void ce_loss_kernel(const float* x, const int64_t* t, const float* stats, int64_t n,
                               int64_t c, double* loss) {
  double part = 0;
  for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
    const int64_t tr = t[r];
    part += (tr >= 0 && tr < c)
                ? math::cross_entropy_row_loss(stats[2 * r], stats[2 * r + 1], x[r * c + tr])
                : double(NAN);
  }
  const double total = detail::block_reduce(part, detail::Add{});
  if (threadIdx.x == 0) *loss = total;
}

// logits, dx [n, c], elementwise over the n * c entries (no reduction: a grid stride).
__global__ void ce_backward_kernel(const float* x, const int64_t* t, const float* stats, int64_t n,
                                   int64_t c, float scale, float* dx) {
  const int64_t total = n * c;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = k / c, i = k - r * c;
    dx[k] = math::cross_entropy_grad(x[k], stats[2 * r], stats[2 * r + 1], i == t[r], scale);
  }
}

}  // namespace

void softmax_rows(const float* x, int64_t rows, int64_t cols, float* y, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_kernel<<<detail::row_blocks(rows), detail::row_threads(cols), 0, stream>>>(x, rows, cols,
                                                                                     y);
  COHORT_CUDA_CHECK_LAUNCH("softmax_rows");
}

void log_softmax_rows(const float* x, int64_t rows, int64_t cols, float* y, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  log_softmax_kernel<<<detail::row_blocks(rows), detail::row_threads(cols), 0, stream>>>(x, rows,
                                                                                         cols, y);
  COHORT_CUDA_CHECK_LAUNCH("log_softmax_rows");
}

void softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols, float* dx,
                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  softmax_backward_kernel<<<detail::row_blocks(rows), detail::row_threads(cols), 0, stream>>>(
      y, g, rows, cols, dx);
  COHORT_CUDA_CHECK_LAUNCH("softmax_backward_rows");
}

void log_softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols,
                               float* dx, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  log_softmax_backward_kernel<<<detail::row_blocks(rows), detail::row_threads(cols), 0, stream>>>(
      y, g, rows, cols, dx);
  COHORT_CUDA_CHECK_LAUNCH("log_softmax_backward_rows");
}

void cross_entropy_forward(const float* logits, const int64_t* targets, int64_t n, int64_t c,
                           float* stats, double* loss, cudaStream_t stream) {
  if (n > 0 && c > 0) {
    ce_stats_kernel<<<detail::row_blocks(n), detail::row_threads(c), 0, stream>>>(logits, n, c,
                                                                                  stats);
    COHORT_CUDA_CHECK_LAUNCH("cross_entropy_forward (stats)");
  }
  if (!loss) return;
  // c == 0 leaves every target out of range: NaN, as there is no class to pick.
  ce_loss_kernel<<<1, 1024, 0, stream>>>(logits, targets, stats, n, c, loss);
  COHORT_CUDA_CHECK_LAUNCH("cross_entropy_forward (loss)");
}

void cross_entropy_backward(const float* logits, const int64_t* targets, const float* stats,
                            int64_t n, int64_t c, float scale, float* dx, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return;
  constexpr unsigned kThreads = 256;
  ce_backward_kernel<<<blocks_for(n * c, kThreads), kThreads, 0, stream>>>(logits, targets, stats,
                                                                           n, c, scale, dx);
  COHORT_CUDA_CHECK_LAUNCH("cross_entropy_backward");
}

}  // namespace cohort::cuda
