#include "cohort/kernels/cuda/layer_norm.h"

#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/column_sums.cuh"
#include "cohort/kernels/cuda/device_math.h"
#include "cohort/kernels/cuda/runtime.h"

// Forward and dx: one block per row (blockIdx.x strides over rows when the grid is capped), the
// row's statistics merged with detail::block_reduce. dw / db: detail::column_sums_kernel.
namespace cohort::cuda {
namespace {

struct MergeMeanVar {
  __device__ math::MeanVar operator()(math::MeanVar a, math::MeanVar b) const {
    return math::meanvar_merge(a, b);
  }
};

// Two float sums reduced together (one pass over shared memory for both of dx's means).
struct Sums2 {
  float a = 0.f, b = 0.f;
};
struct AddSums2 {
  __device__ Sums2 operator()(Sums2 x, Sums2 y) const { return {x.a + y.a, x.b + y.b}; }
};

// x, y [rows, d]; weight, bias [d] or null; mean, rstd [rows].
__global__ void forward_kernel(const float* x, const float* weight, const float* bias, int64_t rows,
                               int64_t d, float eps, float* y, float* mean, float* rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    math::MeanVar s;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s = math::meanvar_add(s, xr[i]);
    s = detail::block_reduce(s, MergeMeanVar{});
    const float mu = s.mean, rs = math::meanvar_rstd(s, eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      yr[i] = math::layer_norm_output(xr[i], mu, rs, weight, bias, i);
  }
}

// dy, x, dx [rows, d]; weight [d] or null; mean, rstd [rows].
__global__ void dx_kernel(const float* dy, const float* x, const float* weight, const float* mean,
                          const float* rstd, int64_t rows, int64_t d, float* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *g = dy + r * d, *xr = x + r * d;
    float* out = dx + r * d;
    const float mu = mean[r], rs = rstd[r];
    Sums2 part;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float gw = weight ? g[i] * weight[i] : g[i];
      part.a += gw;
      part.b += gw * (xr[i] - mu) * rs;
    }
    const Sums2 sums = detail::block_reduce(part, AddSums2{});
    const float m1 = sums.a / float(d), m2 = sums.b / float(d);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float gw = weight ? g[i] * weight[i] : g[i];
      out[i] = math::layer_norm_dx(gw, xr[i], mu, rs, m1, m2);
    }
  }
}

// The addends of dw and db at (row r, column j): dy * xhat and dy.
struct ParamAddends {
  const float *dy, *x, *mean, *rstd;
  int64_t d;
  __device__ float2 operator()(int64_t, int64_t r, int64_t j) const {
    const float g = dy[r * d + j];
    return make_float2(g * (x[r * d + j] - mean[r]) * rstd[r], g);
  }
};

}  // namespace

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t d, float eps, float* y, float* mean, float* rstd,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  // d == 0 still writes mean and rstd (NaN: 0 / 0 as the CPU's sums give).
  forward_kernel<<<detail::row_blocks(rows), detail::row_threads(d), 0, stream>>>(
      x, weight, bias, rows, d, eps, y, mean, rstd);
  COHORT_CUDA_CHECK_LAUNCH("layer_norm_forward");
}

void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t d, const LayerNormGrads& grads,
                         cudaStream_t stream) {
  if (d <= 0) return;
  if (grads.dx && rows > 0) {
    dx_kernel<<<detail::row_blocks(rows), detail::row_threads(d), 0, stream>>>(
        dy, x, weight, mean, rstd, rows, d, grads.dx);
    COHORT_CUDA_CHECK_LAUNCH("layer_norm_backward (dx)");
  }
  if (grads.dw || grads.db) {
    // rows == 0 gives zeros, as the CPU's fill.
    detail::column_sums_kernel<<<detail::column_sums_grid(1, d), detail::column_sums_block(), 0,
                                 stream>>>(1, rows, d, ParamAddends{dy, x, mean, rstd, d}, grads.dw,
                                           grads.db);
    COHORT_CUDA_CHECK_LAUNCH("layer_norm_backward (dw, db)");
  }
}

}  // namespace cohort::cuda
