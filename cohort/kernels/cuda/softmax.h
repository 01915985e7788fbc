#pragma once
// Softmax-family float32 kernels on device pointers: the counterparts of kernels/cpu/softmax.h
// with the same arguments plus the stream they run on. One thread block per row (any length:
// the threads stride along it), the row's max and sum of exponentials kept per thread as a
// math::SoftmaxState and merged across the block in a fixed tree, so results are the same bits
// on every run. A row of all -inf, or one holding a NaN, gives NaN (as kernels/cpu and torch).
// Every kernel is asynchronous on `stream`; a bad launch throws CudaError.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort::cuda {

// x [rows, cols] -> y [rows, cols] = softmax of each row.
void softmax_rows(const float* x, int64_t rows, int64_t cols, float* y, cudaStream_t stream);
// x [rows, cols] -> y [rows, cols] = x - logsumexp(row).
void log_softmax_rows(const float* x, int64_t rows, int64_t cols, float* y, cudaStream_t stream);

// y = softmax(x), g = dL/dy, both [rows, cols] -> dx = y * (g - sum(g * y)).
void softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols, float* dx,
                           cudaStream_t stream);
// y = log_softmax(x), g = dL/dy -> dx = g - exp(y) * sum(g).
void log_softmax_backward_rows(const float* y, const float* g, int64_t rows, int64_t cols,
                               float* dx, cudaStream_t stream);

// logits [n, c], targets [n] -> stats [n, 2] = per row (m, log sum exp(x - m)) with m the row
// max, kept for backward (the layout of cpu::cross_entropy_forward's stats). Where the CPU
// returns the loss, the GPU writes it to the device double *loss (null skips it):
// sum_i -log softmax(logits)[i, targets_i], each row's term in double as on the CPU, the terms
// added in a fixed tree (not the CPU's row order: equal to it up to double rounding). n == 0
// writes 0. There is no reduction or ignore index, as on the CPU: the caller divides by n for a
// mean (ops/softmax.cc does).
// Targets must lie in [0, c); ops/ checks them (a kernel cannot throw). A target outside it is
// never read past: its row's term is NaN, so the loss is NaN. first_out_of_range
// (embedding.h) finds such a target in device memory.
void cross_entropy_forward(const float* logits, const int64_t* targets, int64_t n, int64_t c,
                           float* stats, double* loss, cudaStream_t stream);
// dx [n, c] = (softmax(logits) - onehot(targets)) * scale, from the stats saved by forward.
// scale is dL/dloss / n for the mean reduction. A target outside [0, c) subtracts nothing.
void cross_entropy_backward(const float* logits, const int64_t* targets, const float* stats,
                            int64_t n, int64_t c, float scale, float* dx, cudaStream_t stream);

}  // namespace cohort::cuda
