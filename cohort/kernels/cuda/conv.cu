#include <algorithm>

#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/conv.h"
#include "cohort/kernels/cuda/conv_math.h"
#include "cohort/kernels/cuda/runtime.h"

// Per-element kernels are grid-stride loops (blocks_for caps the grid) with int64 indices; what
// each element computes is conv_math.h's (checked on the CPU by tests/cuda/conv_math_test.cc).
// Below, L = OH * OW, patch = C * KH * KW and g the samples of the current group.
namespace cohort::cuda {
namespace {

constexpr unsigned kThreads = 256;
// Scratch budget for one group (floats): 32 MiB.
constexpr int64_t kGroupBudget = int64_t(1) << 23;

__device__ int64_t first_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t grid_stride() {
  return int64_t(gridDim.x) * blockDim.x;
}

// x [g, C, H, W] -> col [patch, g*L]: column i*L + l is sample i's column l. Consecutive threads
// write consecutive columns (coalesced); their reads are `stride` apart.
__global__ void im2col_kernel(const float* x, math::ConvGeom geo, int64_t g, float* col) {
  const int64_t len = geo.oh * geo.ow, ld = g * len, x_step = geo.c * geo.h * geo.w;
  const int64_t total = geo.c * geo.kh * geo.kw * ld;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t r = k / ld, rem = k - r * ld, i = rem / len;
    col[k] = math::im2col_value(x + i * x_step, geo, r, rem - i * len);
  }
}

// dcol [patch, g*L] -> dx [g, C, H, W], overwritten: each input element gathers its (at most
// KH*KW) column entries, so no two threads write one element and no atomics are needed.
__global__ void col2im_kernel(const float* dcol, math::ConvGeom geo, int64_t g, float* dx) {
  const int64_t len = geo.oh * geo.ow, ld = g * len, hw = geo.h * geo.w, x_step = geo.c * hw;
  const int64_t total = g * x_step;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t i = k / x_step, rem = k - i * x_step, c = rem / hw, p = rem - c * hw;
    const int64_t iy = p / geo.w;
    dx[k] = math::col2im_value(dcol + i * len, ld, geo, c, iy, p - iy * geo.w);
  }
}

// buf [O, g*L] (the group's gemm output) -> y [g, O, L], plus bias [O] where not null. With
// g == 1 the layouts agree and buf may be y: each element is read and written by one thread.
__global__ void spread_kernel(const float* buf, int64_t g, int64_t o, int64_t len,
                              const float* bias, float* y) {
  const int64_t y_step = o * len, total = g * y_step;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t i = k / y_step, rem = k - i * y_step, oc = rem / len, l = rem - oc * len;
    const float v = buf[oc * g * len + i * len + l];
    y[k] = bias ? v + bias[oc] : v;
  }
}

// dy [g, O, L] -> dyg [O, g*L]: the group's output gradient as one matrix (spread's inverse).
__global__ void gather_kernel(const float* dy, int64_t g, int64_t o, int64_t len, float* dyg) {
  const int64_t ld = g * len, total = o * ld;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t oc = k / ld, rem = k - oc * ld, i = rem / len;
    dyg[k] = dy[(i * o + oc) * len + rem - i * len];
  }
}

// dy [N, O, L] -> db [O]: one block per channel; each thread adds its strided share of the
// N*L elements in double, and the block combines them in a fixed tree (block_reduce).
__global__ void bias_grad_kernel(const float* dy, int64_t n, int64_t o, int64_t len, float* db) {
  const int64_t count = n * len;
  for (int64_t oc = blockIdx.x; oc < o; oc += gridDim.x) {  // uniform per block
    double acc = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = k / len;
      acc += dy[(i * o + oc) * len + k - i * len];
    }
    acc = detail::block_reduce(acc, detail::Add{});
    if (threadIdx.x == 0) db[oc] = float(acc);
  }
}

// x [planes, H, W] -> y, argmax [planes, OH, OW]: one thread per output.
__global__ void max_pool_kernel(const float* x, math::PoolGeom geo, int64_t planes, float* y,
                                int32_t* argmax) {
  const int64_t out_plane = geo.oh * geo.ow, total = planes * out_plane;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t p = k / out_plane, rem = k - p * out_plane, oy = rem / geo.ow;
    math::max_pool_window(x + p * geo.h * geo.w, geo, oy, rem - oy * geo.ow, y[k], argmax[k]);
  }
}

// dy, argmax [planes, OH, OW] -> dx [planes, H, W]: one thread per input element, gathering
// from every window that contains it (several where stride < kernel).
__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, math::PoolGeom geo,
                                         int64_t planes, float* dx) {
  const int64_t in_plane = geo.h * geo.w, out_plane = geo.oh * geo.ow, total = planes * in_plane;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t p = k / in_plane, rem = k - p * in_plane, iy = rem / geo.w;
    dx[k] =
        math::max_pool_grad(dy + p * out_plane, argmax + p * out_plane, geo, iy, rem - iy * geo.w);
  }
}

void check_stream(const MatmulHandle& h, cudaStream_t stream) {
  COHORT_CHECK_ARG(h.stream() == stream,
                   "conv2d: the MatmulHandle runs on another stream than the one given");
}

void im2col(const float* x, const math::ConvGeom& geo, int64_t g, float* col, cudaStream_t stream) {
  const int64_t total = geo.c * geo.kh * geo.kw * g * geo.oh * geo.ow;
  if (total <= 0) return;
  im2col_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(x, geo, g, col);
  COHORT_CUDA_CHECK_LAUNCH("conv2d im2col");
}

void col2im(const float* dcol, const math::ConvGeom& geo, int64_t g, float* dx,
            cudaStream_t stream) {
  const int64_t total = g * geo.c * geo.h * geo.w;
  if (total <= 0) return;
  col2im_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(dcol, geo, g, dx);
  COHORT_CUDA_CHECK_LAUNCH("conv2d col2im");
}

void spread(const float* buf, int64_t g, int64_t o, int64_t len, const float* bias, float* y,
            cudaStream_t stream) {
  const int64_t total = g * o * len;
  spread_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(buf, g, o, len, bias, y);
  COHORT_CUDA_CHECK_LAUNCH("conv2d output layout");
}

void gather(const float* dy, int64_t g, int64_t o, int64_t len, float* dyg, cudaStream_t stream) {
  const int64_t total = g * o * len;
  gather_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(dy, g, o, len, dyg);
  COHORT_CUDA_CHECK_LAUNCH("conv2d output gradient layout");
}

void bias_grad(const float* dy, int64_t n, int64_t o, int64_t len, float* db, cudaStream_t stream) {
  const unsigned threads = detail::row_threads(n * len);
  bias_grad_kernel<<<detail::row_blocks(o), threads, 0, stream>>>(dy, n, o, len, db);
  COHORT_CUDA_CHECK_LAUNCH("conv2d bias gradient");
}

// Gradients of an empty product (no samples, no outputs): zeros, as the CPU gives.
void zero_grads(const Conv2dShape& s, const Conv2dGrads& grads, cudaStream_t stream) {
  auto zero = [&](float* p, int64_t n) {
    if (p && n > 0) COHORT_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * sizeof(float), stream));
  };
  zero(grads.dx, s.n * s.c * s.h * s.w);
  zero(grads.dw, s.o * s.patch());
  zero(grads.db, s.o);
}

}  // namespace

int64_t conv2d_group(const Conv2dShape& s) {
  const int64_t per_sample = std::max<int64_t>(1, (s.patch() + s.o) * s.oh() * s.ow());
  return std::clamp<int64_t>(kGroupBudget / per_sample, 1, std::max<int64_t>(1, s.n));
}

int64_t conv2d_forward_workspace(const Conv2dShape& s) {
  const int64_t len = s.oh() * s.ow();
  if (s.n <= 0 || s.oh() <= 0 || s.ow() <= 0) return 0;
  const int64_t g = conv2d_group(s);
  return s.patch() * g * len + (g > 1 ? s.o * g * len : 0);
}

int64_t conv2d_backward_workspace(const Conv2dShape& s) {
  // Qualified: the shape is cpu::'s, so argument-dependent lookup also finds the CPU's.
  return cuda::conv2d_forward_workspace(s);
}

// Per group: col [patch, g*L] = im2col(x_g); out [O, g*L] = w [O, patch] x col; out is y itself
// for a group of one (the layouts agree), else the scratch after col, spread into y's [g, O, L]
// layout. The bias is added on the way (in place for a group of one).
void conv2d_forward(MatmulHandle& h, const Conv2dShape& s, const float* x, const float* w,
                    const float* bias, float* y, float* workspace, cudaStream_t stream) {
  check_stream(h, stream);
  if (s.n <= 0 || s.o <= 0 || s.oh() <= 0 || s.ow() <= 0) return;
  const math::ConvGeom geo = math::conv_geom(s);
  const int64_t len = geo.oh * geo.ow, patch = s.patch(), group = conv2d_group(s);
  const int64_t x_step = s.c * s.h * s.w, y_step = s.o * len;
  float* col = workspace;
  float* buf = workspace + patch * group * len;
  for (int64_t n0 = 0; n0 < s.n; n0 += group) {
    const int64_t g = std::min(group, s.n - n0), ld = g * len;
    im2col(x + n0 * x_step, geo, g, col, stream);
    float* yn = y + n0 * y_step;
    float* out = g == 1 ? yn : buf;
    sgemm(h, s.o, ld, patch, 1.f, {w, patch}, {col, ld}, 0.f, out, ld);
    if (g > 1 || bias) spread(out, g, s.o, len, bias, yn, stream);
  }
}

// db: one reduction over all of dy. Per group: d [O, g*L] = dy_g (gathered when g > 1);
// dw [O, patch] (+)= d x im2col(x_g)^T, the first group overwriting, later ones adding in order;
// dcol [patch, g*L] = w^T [patch, O] x d into the im2col buffer (its columns are used by then),
// then col2im into the group's dx.
void conv2d_backward(MatmulHandle& h, const Conv2dShape& s, const float* x, const float* w,
                     const float* dy, const Conv2dGrads& grads, float* workspace,
                     cudaStream_t stream) {
  check_stream(h, stream);
  if (s.n <= 0 || s.o <= 0 || s.oh() <= 0 || s.ow() <= 0) {
    zero_grads(s, grads, stream);
    return;
  }
  const math::ConvGeom geo = math::conv_geom(s);
  const int64_t len = geo.oh * geo.ow, patch = s.patch(), group = conv2d_group(s);
  const int64_t x_step = s.c * s.h * s.w, y_step = s.o * len;
  if (grads.db) bias_grad(dy, s.n, s.o, len, grads.db, stream);
  if (!grads.dx && !grads.dw) return;
  float* col = workspace;
  float* dyg = workspace + patch * group * len;
  for (int64_t n0 = 0; n0 < s.n; n0 += group) {
    const int64_t g = std::min(group, s.n - n0), ld = g * len;
    const float* d = dy + n0 * y_step;
    if (g > 1) {
      gather(d, g, s.o, len, dyg, stream);
      d = dyg;
    }
    if (grads.dw) {
      im2col(x + n0 * x_step, geo, g, col, stream);
      sgemm(h, s.o, patch, ld, 1.f, {d, ld}, {col, ld, Trans::kYes}, n0 == 0 ? 0.f : 1.f, grads.dw,
            patch);
    }
    if (grads.dx) {
      sgemm(h, patch, ld, s.o, 1.f, {w, patch, Trans::kYes}, {d, ld}, 0.f, col, ld);
      col2im(col, geo, g, grads.dx + n0 * x_step, stream);
    }
  }
}

void max_pool2d_forward(const Pool2dShape& s, const float* x, float* y, int32_t* argmax,
                        cudaStream_t stream) {
  const math::PoolGeom geo = math::pool_geom(s);
  const int64_t total = s.n * s.c * geo.oh * geo.ow;
  if (s.n * s.c <= 0 || geo.oh <= 0 || geo.ow <= 0) return;
  max_pool_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(x, geo, s.n * s.c, y,
                                                                        argmax);
  COHORT_CUDA_CHECK_LAUNCH("max_pool2d_forward");
}

void max_pool2d_backward(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx,
                         cudaStream_t stream) {
  const math::PoolGeom geo = math::pool_geom(s);
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total <= 0) return;
  max_pool_backward_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(dy, argmax, geo,
                                                                                 s.n * s.c, dx);
  COHORT_CUDA_CHECK_LAUNCH("max_pool2d_backward");
}

}  // namespace cohort::cuda
