#include "cohort/kernels/cuda/dropout.h"
#include "cohort/kernels/cuda/philox_math.h"
#include "cohort/kernels/cuda/runtime.h"

// One thread per Philox block: block b gives the uniforms of elements 4b .. 4b+3 (the CPU's
// grouping), so each block is computed once and its four words used in place. The per-element
// decision is math::dropout_value, the host-tested formula.
namespace cohort::cuda {
namespace {

constexpr unsigned kThreads = 256;

// x, y [n]; `vec4`: x and y are 16-byte aligned, so a full block moves as one float4.
__global__ void dropout_kernel(const float* x, int64_t n, float p, float scale, uint64_t seed,
                               float* y, bool vec4) {
  const int64_t blocks = (n + 3) / 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride) {
    const math::PhiloxBlock r = math::philox4x32_10(seed, uint64_t(b));
    const int64_t base = 4 * b;
    if (vec4 && base + 4 <= n) {
      const float4 v = reinterpret_cast<const float4*>(x)[b];
      reinterpret_cast<float4*>(y)[b] = float4{
          math::dropout_value(v.x, r.v[0], p, scale), math::dropout_value(v.y, r.v[1], p, scale),
          math::dropout_value(v.z, r.v[2], p, scale), math::dropout_value(v.w, r.v[3], p, scale)};
      continue;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (base + k < n) y[base + k] = math::dropout_value(x[base + k], r.v[k], p, scale);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

void dropout_apply(const float* x, int64_t n, float p, uint64_t seed, float* y,
                   cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = (n + 3) / 4;
  dropout_kernel<<<blocks_for(blocks, kThreads), kThreads, 0, stream>>>(
      x, n, p, math::dropout_scale(p), seed, y, aligned16(x) && aligned16(y));
  COHORT_CUDA_CHECK_LAUNCH("dropout_apply");
}

}  // namespace cohort::cuda
