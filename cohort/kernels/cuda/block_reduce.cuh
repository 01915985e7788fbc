#pragma once
// Reductions across the threads of a block, for the row kernels (softmax, layer norm, row sums):
// every thread holds a partial value (a float, a double, a math::SoftmaxState or math::MeanVar),
// and the block combines them with `op` in a tree whose shape depends only on blockDim. So a row
// reduced with the same block size gives the same bits on every run (no atomics, no order that
// depends on scheduling).
//
// Only .cu files include this (nvcc). Requirements: blockDim.x a multiple of 32 (full warps, so
// the shuffles' full mask is valid) and at most 1024; blockDim.y == blockDim.z == 1; every thread
// of the block calls it (it synchronises the block).
#include <cstring>

namespace cohort::cuda::detail {

// A value of any trivially copyable type T (size a multiple of 4) moved `delta` lanes down the
// warp, 32 bits at a time; lanes past the end get their own value back (unused below).
template <typename T>
__device__ __forceinline__ T shfl_down(T v, unsigned delta) {
  static_assert(sizeof(T) % 4 == 0, "shuffled types are whole 32-bit words");
  constexpr int kWords = sizeof(T) / 4;
  unsigned w[kWords];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_down_sync(0xffffffffu, w[i], delta);
  memcpy(&v, w, sizeof(T));
  return v;
}

// Lane 0 ends with op over the 32 lanes' values (lane i combined with lane i + 16, then + 8, ...).
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (unsigned delta = 16; delta > 0; delta /= 2) v = op(v, shfl_down(v, delta));
  return v;
}

// Every lane ends with the max (the sum) of the warp's 32 values: a butterfly of xor shuffles,
// the same tree on every lane (the attention kernels' per-row softmax statistics).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// op over every thread's `v`, returned to every thread. T{} must be op's identity (0 for a sum,
// the empty SoftmaxState / MeanVar). Warps reduce with shuffles; warp 0 then reduces the warps'
// results from shared memory and broadcasts through it. The shared memory is raw bytes because
// a __shared__ variable may not have a constructor (SoftmaxState's members have initialisers).
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ alignas(16) unsigned char warp_bytes[32 * sizeof(T)];
  __shared__ alignas(16) unsigned char result_bytes[sizeof(T)];
  T* warp_part = reinterpret_cast<T*>(warp_bytes);
  T* result = reinterpret_cast<T*>(result_bytes);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? warp_part[lane] : T{};
    w = warp_reduce(w, op);
    if (lane == 0) *result = w;
  }
  __syncthreads();
  const T out = *result;
  // The next call reuses warp_part and result: nobody may write them before all have read.
  __syncthreads();
  return out;
}

// Threads per block for a kernel that gives one block to each row of `cols` elements: enough to
// keep a few elements per thread, a multiple of 32, at most 1024. A function of cols only, so
// the reduction tree (and the result's bits) is the same on every run.
inline unsigned row_threads(int64_t cols) {
  if (cols <= 128) return 32;
  if (cols <= 1024) return 128;
  if (cols <= 8192) return 256;
  return 1024;
}

// Blocks for `rows` rows, one each, capped at what a grid may hold; kernels loop over rows with
// a stride of gridDim.x, so a capped grid still covers every row.
inline unsigned row_blocks(int64_t rows) {
  const int64_t cap = int64_t{1} << 30;
  return unsigned(rows < 1 ? 1 : (rows > cap ? cap : rows));
}

struct Add {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};

}  // namespace cohort::cuda::detail
