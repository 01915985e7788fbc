#pragma once
// What attention_bf16_forward.cu and attention_bf16_backward.cu share: the tile layout, loads of
// f32 rows into bf16 shared tiles, and the two wmma products every pass is built of.
//
// A block has 4 warps and a tile of 64 rows of one head (grid.x = B * H heads, grid.y = tiles);
// warp w owns rows 16w..16w+15 of the block's tile, one wmma fragment high, so the products, the
// softmax and the elementwise steps of a warp touch only its own rows of the per-row buffers
// (a __syncwarp orders them); only the shared K/V (or Q/dO) tiles need __syncthreads.
// Shared row strides are padded (bf16 rows by 8 elements, f32 rows by 4) so the rows of a
// fragment start in different banks, and stay multiples of 8 (bf16) and 4 (f32) elements as
// wmma requires; every buffer is a multiple of 32 bytes long, so every fragment pointer (row
// 16 i, column 16 j) is 32-byte aligned as wmma requires.
//
// Its own namespace: attention.cu's helpers have the same names, and a unity build may compile
// the .cu files as one.
#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

#include "cohort/kernels/cuda/attention.h"
#include "cohort/kernels/cuda/attention_math.h"
#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/runtime.h"

namespace cohort::cuda::bf16_attn {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTile = math::kAttnBf16Tile;  // rows of a block, keys (or queries) of a step
constexpr int kWarps = kTile / 16;          // one fragment height per warp
constexpr int kThreads = kWarps * 32;
constexpr int kLdS = kTile + 4;  // f32 [kTile][kTile] score-like buffers
constexpr int kLdP = kTile + 8;  // bf16 [kTile][kTile] probability-like buffers
static_assert(kTile == 64, "two scores per lane in the softmax and the elementwise steps");

// The row stride of a bf16 [kTile][kDh] tile.
template <int kDh>
constexpr int ld_rows() {
  return kDh + 8;
}

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// One head's q, k, v rows and their row strides.
struct Head {
  const float *q, *k, *v;
  int64_t qt, kt, vt;
};

__device__ __forceinline__ Head head_of(const AttnInputs& in, int64_t bh, int64_t heads) {
  const int64_t b = bh / heads, h = bh % heads;
  return {in.q + b * in.qs.b + h * in.qs.h,
          in.k + b * in.ks.b + h * in.ks.h,
          in.v + b * in.vs.b + h * in.vs.h,
          in.qs.t,
          in.ks.t,
          in.vs.t};
}

using detail::warp_max;  // block_reduce.cuh
using detail::warp_sum;

// Rows [r0, r0 + kTile) of an f32 [T, kDh] matrix with row stride `ld` into the bf16 tile `dst`,
// rounded to nearest even (kernels/cpu's float_to_bf16). Rows past T become zeros: masked
// weights (0) times them stay 0, where leftover shared memory could hold a NaN. `vec`: src and
// ld allow float4 loads (checked on the host).
template <int kDh>
__device__ __forceinline__ void load_tile(bf16* dst, const float* src, int64_t ld, int64_t r0,
                                          int64_t t, bool vec) {
  constexpr int ldd = ld_rows<kDh>();
  if (vec) {
    constexpr int kQuads = kDh / 4;
    for (int idx = threadIdx.x; idx < kTile * kQuads; idx += kThreads) {
      const int r = idx / kQuads, d = (idx - r * kQuads) * 4;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r0 + r < t) x = *reinterpret_cast<const float4*>(src + (r0 + r) * ld + d);
      auto* out = reinterpret_cast<__nv_bfloat162*>(dst + r * ldd + d);
      out[0] = __floats2bfloat162_rn(x.x, x.y);
      out[1] = __floats2bfloat162_rn(x.z, x.w);
    }
  } else {
    for (int idx = threadIdx.x; idx < kTile * kDh; idx += kThreads) {
      const int r = idx / kDh, d = idx - r * kDh;
      dst[r * ldd + d] = __float2bfloat16_rn(r0 + r < t ? src[(r0 + r) * ld + d] : 0.f);
    }
  }
}

// One warp: c[16][kTile] (f32, row stride ldc) = a[16][kDh] . b[kTile][kDh]^T, a and b bf16
// rows (row strides lda, ldb): the 16 rows' scores against a tile of 64 rows.
template <int kDh>
__device__ __forceinline__ void rows_dot_tile(float* c, int ldc, const bf16* a, int lda,
                                              const bf16* b, int ldb) {
  FragC acc[kTile / 16];
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
#pragma unroll
  for (int kk = 0; kk < kDh; kk += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, lda);
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragBCol fb;  // b^T's [kk, 16 n] block: b's rows read as columns
      wmma::load_matrix_sync(fb, b + n * 16 * ldb + kk, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n)
    wmma::store_matrix_sync(c + n * 16, acc[n], ldc, wmma::mem_row_major);
}

// One warp: acc[16][kDh] += a[16][kTile] . b[kTile][kDh], a and b bf16 row-major (row strides
// lda, ldb): weights of a tile's 64 rows times those rows.
template <int kDh>
__device__ __forceinline__ void add_rows_times_tile(FragC (&acc)[kDh / 16], const bf16* a, int lda,
                                                    const bf16* b, int ldb) {
#pragma unroll
  for (int kk = 0; kk < kTile; kk += 16) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, lda);
#pragma unroll
    for (int n = 0; n < kDh / 16; ++n) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + kk * ldb + n * 16, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// The grid (heads, tiles of kTile rows) once the shape is checked; false when there is nothing
// to compute.
inline bool grid_for(const AttnShape& s, const char* what, dim3* grid) {
  if (s.b <= 0 || s.h <= 0 || s.t <= 0) return false;
  const int64_t heads = s.b * s.h, tiles = (s.t + kTile - 1) / kTile;
  COHORT_CHECK_ARG(heads <= INT32_MAX && tiles <= 65535, what, ": B * H = ", heads,
                   " and T = ", s.t, " exceed the grid");
  *grid = dim3(unsigned(heads), unsigned(tiles));
  return true;
}

inline bool quad_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whether every row load may be a float4: q, k, v and their strides (and the contiguous
// [.., Dh] rows of dout and out, Dh being 32 or 64) on 16-byte boundaries.
inline bool quad_loads(const AttnInputs& in, const float* out = nullptr,
                       const float* dout = nullptr) {
  auto strides_ok = [](const AttnStrides& st) {
    return st.b % 4 == 0 && st.h % 4 == 0 && st.t % 4 == 0;
  };
  return quad_aligned(in.q) && quad_aligned(in.k) && quad_aligned(in.v) && strides_ok(in.qs) &&
         strides_ok(in.ks) && strides_ok(in.vs) && quad_aligned(out) && quad_aligned(dout);
}

// Dynamic shared memory past 48 KiB must be asked for per kernel.
template <typename Kernel>
void reserve_shared(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    COHORT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace cohort::cuda::bf16_attn
