#pragma once
// Embedding lookup and its scatter-add gradient on device pointers, float32 rows, int64 indices:
// the counterparts of kernels/cpu/embedding.h with the same arguments plus the stream. Every
// kernel is asynchronous on `stream`; a bad launch throws CudaError.
//
// Indices outside [0, V): the CPU kernels take them as already checked (ops/embedding.cc throws
// first). A kernel cannot throw, so here they are never dereferenced: forward writes a zero row
// for one, backward skips it. first_out_of_range lets a caller whose indices live on the device
// check them on the stream.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cohort::cuda {

// weight [V, D], idx [n] -> out [n, D]: row i = weight[idx[i]] (zeros where idx[i] is out of
// [0, V)). The same bits as the CPU (a copy). The one argument the CPU lacks is v, the bound
// that keeps a bad index from reading past weight.
void embedding_forward(const float* weight, int64_t v, int64_t d, const int64_t* idx, int64_t n,
                       float* out, cudaStream_t stream);

// dout [n, D] -> dweight [V, D] (overwritten): zeros, then dweight[idx[i]] += dout[i] for i in
// order, out-of-range indices skipped.
// Deterministic without sorting or atomics: every element dweight[u, j] is owned by one thread
// (a thread owns one column j for a contiguous slice of the vocabulary), which zeroes it and then
// walks all n indices in order, adding dout[i, j] when idx[i] == u. So each element is the same
// float additions in the same order as the CPU's: the same bits as cpu::embedding_backward. The
// index list is staged through shared memory and read by every slice: work n * (slices), with
// slices chosen to give ~64k threads.
void embedding_backward(const float* dout, const int64_t* idx, int64_t n, int64_t v, int64_t d,
                        float* dweight, cudaStream_t stream);

// *first (device) = the smallest position i with idx[i] outside [0, limit), or n when every
// index is in range: the check ops/ does on the host, for indices already on the device
// (embedding's indices against V, cross entropy's targets against C). Integer atomicMin only:
// the result does not depend on the order the threads run in.
void first_out_of_range(const int64_t* idx, int64_t n, int64_t limit, int64_t* first,
                        cudaStream_t stream);

}  // namespace cohort::cuda
