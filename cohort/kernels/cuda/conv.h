#pragma once
// 2-D convolution (im2col + cuBLASLt) and max pooling on device pointers, float32, NCHW,
// contiguous: the counterparts of kernels/cpu/conv.h with the same shapes and arguments, plus the
// cuBLASLt handle the convolutions multiply with (the caller's, bound to `stream`) and the
// stream. Every call is asynchronous on `stream`; a bad launch throws CudaError.
//
// Convolution works on groups of G samples (conv2d_group): the group's im2col columns sit side
// by side in one [C*KH*KW, G*OH*OW] matrix, so each step is one wide gemm. G is as large as a
// 32 MiB scratch budget allows, so a small network (Fashion-MNIST's CNN) runs its whole batch in
// one gemm per step.
//
// Determinism: no float atomics anywhere. col2im and the pooling backward gather (each input
// element adds its contributions in a fixed order, the CPU's, from 0); the weight gradient is
// one gemm per group added in group order (beta = 1); the bias gradient is a fixed-tree block
// reduction per output channel. So a shape gives the same bits on every run (given cuBLASLt's
// algorithm choice, which is cached per shape).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cohort/kernels/cpu/conv.h"
#include "cohort/kernels/cuda/matmul.h"

namespace cohort::cuda {

// The CPU's shapes, so the ops layer builds one and hands it to either device. Because the
// shape lives in cpu::, argument-dependent lookup also finds cpu::conv2d_*_workspace: call the
// size functions qualified, cuda::conv2d_forward_workspace(s) (the kernels differ in arity).
using Conv2dShape = cpu::Conv2dShape;
using Conv2dGrads = cpu::Conv2dGrads;
using Pool2dShape = cpu::Pool2dShape;

// Samples per gemm: as many as fit the scratch budget (at least 1, at most N).
int64_t conv2d_group(const Conv2dShape& s);

// Scratch (floats, device memory) that conv2d_forward / conv2d_backward need for this shape,
// for the caller to allocate once: the group's im2col matrix [C*KH*KW, G*OH*OW] plus, when
// G > 1, the group's output (or output gradient) as one [O, G*OH*OW] matrix. The backward reuses
// the im2col buffer for the column gradient, so both need the same amount.
int64_t conv2d_forward_workspace(const Conv2dShape& s);
int64_t conv2d_backward_workspace(const Conv2dShape& s);

// x [N, C, H, W], w [O, C, KH, KW], bias [O] or null -> y [N, O, OH, OW]. h.stream() must be
// `stream`.
void conv2d_forward(MatmulHandle& h, const Conv2dShape& s, const float* x, const float* w,
                    const float* bias, float* y, float* workspace, cudaStream_t stream);

// dy [N, O, OH, OW] with the forward's x and w -> the requested gradients (overwritten; a null
// pointer in `grads` skips that one).
void conv2d_backward(MatmulHandle& h, const Conv2dShape& s, const float* x, const float* w,
                     const float* dy, const Conv2dGrads& grads, float* workspace,
                     cudaStream_t stream);

// x [N, C, H, W] -> y [N, C, OH, OW]; argmax [N, C, OH, OW] = index h * W + w of the first
// maximum in each window within its (n, c) plane (NaN counts as the maximum). One thread per
// output: the same values and indices as the CPU, bit for bit.
void max_pool2d_forward(const Pool2dShape& s, const float* x, float* y, int32_t* argmax,
                        cudaStream_t stream);
// dx [N, C, H, W] = dy routed to the argmax positions (summed where windows overlap, which they
// do when stride < kernel): one thread per input element gathers from the windows containing it,
// in the CPU's order, so the bits match it.
void max_pool2d_backward(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx,
                         cudaStream_t stream);

}  // namespace cohort::cuda
