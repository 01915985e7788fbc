#pragma once
// Deterministic column sums, for the reductions over rows (sum_rows: the bias gradient,
// sum_middle with inner > 1, layer norm's dw and db): each block owns 32 columns of one batch
// and no other block touches them, so there are no atomics and the order of every addition is
// fixed by the launch shape alone.
//
// Block (32, kRowGroups): thread (tx, ty) adds rows ty, ty + kRowGroups, ... of column
// 32 * blockIdx.x + tx in double (the CPU keeps float blocks and adds them in double: double
// here keeps the GPU within float rounding of it); then the threads with ty == 0 add the
// kRowGroups partial sums in ty order. A warp is 32 consecutive columns of one row: coalesced.
// Only .cu files include this (nvcc).
#include <cstdint>

namespace cohort::cuda::detail {

constexpr unsigned kColTile = 32, kRowGroups = 16;

// Two sums at once (layer norm's dw and db share their reads); f(batch, row, col) returns the
// two addends as a float2. out_a / out_b [batches, cols], either may be null.
template <typename F>
__global__ void column_sums_kernel(int64_t batches, int64_t rows, int64_t cols, F f, float* out_a,
                                   float* out_b) {
  __shared__ double part_a[kRowGroups][kColTile], part_b[kRowGroups][kColTile];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kColTile + tx;
  for (int64_t b = blockIdx.y; b < batches; b += gridDim.y) {
    double a = 0, s = 0;
    if (j < cols) {
      for (int64_t r = ty; r < rows; r += kRowGroups) {
        const float2 v = f(b, r, j);
        a += v.x;
        s += v.y;
      }
    }
    part_a[ty][tx] = a;
    part_b[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && j < cols) {
      double ta = 0, tb = 0;
      for (unsigned g = 0; g < kRowGroups; ++g) {
        ta += part_a[g][tx];
        tb += part_b[g][tx];
      }
      if (out_a) out_a[b * cols + j] = float(ta);
      if (out_b) out_b[b * cols + j] = float(tb);
    }
    // part_a / part_b are rewritten for the next batch only after ty == 0 has read them.
    __syncthreads();
  }
}

// The launch shape for `batches` matrices of [rows, cols]: blocks over column tiles (x) and
// batches (y, capped at the grid's limit; the kernel strides over the rest).
inline dim3 column_sums_grid(int64_t batches, int64_t cols) {
  const int64_t tiles = (cols + kColTile - 1) / kColTile;
  const int64_t by = batches < 65535 ? batches : 65535;
  return dim3(unsigned(tiles), unsigned(by < 1 ? 1 : by));
}
inline dim3 column_sums_block() {
  return dim3(kColTile, kRowGroups);
}

}  // namespace cohort::cuda::detail
