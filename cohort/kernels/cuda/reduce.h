#pragma once
// Sums on device pointers, float32: the counterparts of cpu::sum_middle (kernels/cpu/reduce.h)
// and of the bias helpers cpu::sum_rows / cpu::fill_rows (kernels/cpu/gemm.h), with the same
// arguments plus the stream. Every kernel is asynchronous on `stream`; a bad launch throws
// CudaError. No atomics: each output element is computed by one fixed sequence of operations
// that depends only on the shapes, so results are the same bits on every run.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort::cuda {

// x [outer, r, inner] -> out [outer, inner] = sum over r (r == 0 gives zeros).
// inner == 1: one block per row of r, each thread adding its strided elements in double, the
// block's threads combined in a fixed tree. inner > 1: column sums (each block owns 32 columns
// of one outer slice; 16 threads per column add every 16th row in double, then in order).
// Within float rounding of the CPU, which adds float blocks in double.
void sum_middle(const float* x, int64_t outer, int64_t r, int64_t inner, float* out,
                cudaStream_t stream);

// out [cols] = sum over rows of g [rows, cols] (the bias gradient); the column sums of
// sum_middle with outer = 1.
void sum_rows(const float* g, int64_t rows, int64_t cols, float* out, cudaStream_t stream);

// y [rows, cols]: every row = bias [cols] (the bias broadcast before a beta = 1 gemm).
void fill_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace cohort::cuda
