#pragma once
// Dropout on device pointers, float32: the counterpart of cpu::dropout_apply
// (kernels/cpu/dropout.h) with the same arguments plus the stream. The mask is the CPU's:
// element i is kept when Philox(seed).uniform(i) >= p (math::philox4x32_10, checked bit for bit
// against core/rng.h on the host), so a GPU run drops exactly the elements a CPU run drops.
// Asynchronous on `stream`; a bad launch throws CudaError.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort::cuda {

// y [n] = x [n] * keep_i / (1 - p); y may be x. Backward is the same call on the gradient.
void dropout_apply(const float* x, int64_t n, float p, uint64_t seed, float* y,
                   cudaStream_t stream);

}  // namespace cohort::cuda
