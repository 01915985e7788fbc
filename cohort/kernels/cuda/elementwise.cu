#include "cohort/kernels/cuda/elementwise.h"
#include "cohort/kernels/cuda/runtime.h"

// Every kernel is a grid-stride loop over its elements (blocks_for caps the grid), indices in
// int64 so tensors past 2^31 elements work. The arithmetic is device_math.h's.
namespace cohort::cuda {
namespace {

constexpr unsigned kThreads = 256;

__device__ int64_t first_index() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t grid_stride() {
  return int64_t(gridDim.x) * blockDim.x;
}

__global__ void binary_2d_kernel(math::Binary op, int64_t rows, int64_t n, const float* a,
                                 int64_t a_row, int64_t a_col, const float* b, int64_t b_row,
                                 int64_t b_col, float* out) {
  const int64_t total = rows * n;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t r = k / n, i = k - r * n;
    out[k] = math::apply_binary(op, a[r * a_row + i * a_col], b[r * b_row + i * b_col]);
  }
}

__global__ void affine_kernel(const float* x, float scale, float shift, float* out, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) out[k] = x[k] * scale + shift;
}

__global__ void unary_kernel(math::Unary op, const float* x, float* out, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) out[k] = math::apply_unary(op, x[k]);
}

__global__ void gelu_backward_kernel(const float* x, const float* g, float* dx, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) dx[k] = g[k] * math::gelu_grad(x[k]);
}

__global__ void relu_backward_kernel(const float* x, const float* g, float* dx, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) dx[k] = x[k] > 0.f ? g[k] : 0.f;
}

__global__ void unary_backward_kernel(math::UnaryGrad op, const float* y, const float* g, float* dx,
                                      int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride())
    dx[k] = math::unary_grad(op, y[k], g[k]);
}

__global__ void pow_kernel(const float* x, float p, float* out, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) out[k] = math::pow_value(x[k], p);
}

__global__ void pow_backward_kernel(const float* x, float p, const float* g, float* dx, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) dx[k] = math::pow_grad(x[k], p, g[k]);
}

// out [outer, r, inner]: element (o, j, i) = g (o, i) * scale.
__global__ void broadcast_middle_kernel(const float* g, int64_t outer, int64_t r, int64_t inner,
                                        float scale, float* out) {
  const int64_t total = outer * r * inner;
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const int64_t i = k % inner, o = k / (r * inner);
    out[k] = g[o * inner + i] * scale;
  }
}

__global__ void f32_to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) y[k] = math::bf16_from_f32(x[k]);
}

__global__ void bf16_to_f32_kernel(const uint16_t* x, float* y, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) y[k] = math::f32_from_bf16(x[k]);
}

__global__ void fill_kernel(float* x, float value, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) x[k] = value;
}

}  // namespace

void binary_2d(math::Binary op, int64_t rows, int64_t n, const float* a, int64_t a_row,
               int64_t a_col, const float* b, int64_t b_row, int64_t b_col, float* out,
               cudaStream_t stream) {
  if (rows * n == 0) return;
  binary_2d_kernel<<<blocks_for(rows * n, kThreads), kThreads, 0, stream>>>(
      op, rows, n, a, a_row, a_col, b, b_row, b_col, out);
  COHORT_CUDA_CHECK_LAUNCH("binary_2d");
}

void affine(const float* x, float scale, float shift, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  affine_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, scale, shift, out, n);
  COHORT_CUDA_CHECK_LAUNCH("affine");
}

void unary(math::Unary op, const float* x, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  unary_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(op, x, out, n);
  COHORT_CUDA_CHECK_LAUNCH("unary");
}

void gelu_backward(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, g, dx, n);
  COHORT_CUDA_CHECK_LAUNCH("gelu_backward");
}

void relu_backward(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, g, dx, n);
  COHORT_CUDA_CHECK_LAUNCH("relu_backward");
}

void unary_backward(math::UnaryGrad op, const float* y, const float* g, float* dx, int64_t n,
                    cudaStream_t stream) {
  if (n == 0) return;
  unary_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(op, y, g, dx, n);
  COHORT_CUDA_CHECK_LAUNCH("unary_backward");
}

void pow_scalar(const float* x, float p, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  pow_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, p, out, n);
  COHORT_CUDA_CHECK_LAUNCH("pow_scalar");
}

void pow_scalar_backward(const float* x, float p, const float* g, float* dx, int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  pow_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, p, g, dx, n);
  COHORT_CUDA_CHECK_LAUNCH("pow_scalar_backward");
}

void broadcast_middle(const float* g, int64_t outer, int64_t r, int64_t inner, float scale,
                      float* out, cudaStream_t stream) {
  const int64_t total = outer * r * inner;
  if (total == 0) return;
  broadcast_middle_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(g, outer, r, inner,
                                                                                scale, out);
  COHORT_CUDA_CHECK_LAUNCH("broadcast_middle");
}

void f32_to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  f32_to_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
  COHORT_CUDA_CHECK_LAUNCH("f32_to_bf16");
}

void bf16_to_f32(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  bf16_to_f32_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
  COHORT_CUDA_CHECK_LAUNCH("bf16_to_f32");
}

void fill(float* x, float value, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, value, n);
  COHORT_CUDA_CHECK_LAUNCH("fill");
}

}  // namespace cohort::cuda
