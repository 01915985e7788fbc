#include "cohort/kernels/cuda/attention.h"

#include <type_traits>

#include "cohort/kernels/cuda/attention_math.h"
#include "cohort/kernels/cuda/block_reduce.cuh"
#include "cohort/kernels/cuda/runtime.h"

// Layout shared by the kernels. A block has 8 warps (256 threads) and one tile of 32 rows of
// one head (grid.x = B * H heads, grid.y = tiles). Each warp owns 4 of the 32 rows; lanes split
// the other side's 32 rows for the scores (lane j: key j, or query j in dk/dv's kernel) and the
// head dim for the accumulators (lane l: dims l, l + 32, ... in kC = ceil(Dh / 32) registers).
// The side read one row per lane sits in shared memory with rows padded to Dh + 1 floats, so 32
// lanes reading 32 rows hit 32 banks (for even Dh); the side read as a broadcast is unpadded.
// Every sum runs in a fixed order (loops, and xor-shuffle trees that give every lane the same
// bits), every output element is written by one thread: the same bits on every run.
namespace cohort::cuda {
namespace {

constexpr int kTile = math::kAttnTile;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kTile / kWarps;  // rows of the block's tile per warp
static_assert(kTile == 32, "one lane per row of the other side's tile");

// One head's rows: q, k, v of head (b, h) and their row strides.
struct Head {
  const float *q, *k, *v;
  int64_t qt, kt, vt;
};

__device__ Head head_at(const AttnInputs& in, int64_t bh, int64_t heads) {
  const int64_t b = bh / heads, h = bh % heads;
  return {in.q + b * in.qs.b + h * in.qs.h,
          in.k + b * in.ks.b + h * in.ks.h,
          in.v + b * in.vs.b + h * in.vs.h,
          in.qs.t,
          in.ks.t,
          in.vs.t};
}

// Rows [r0, r0 + kTile) of a [T, dh] matrix with row stride `ld` into shared `dst` (row stride
// `dst_ld`), read along dh (coalesced). Rows past T become zeros: a masked weight (0) times
// them stays 0, where leftover shared memory could hold a NaN.
__device__ void load_rows(float* dst, int dst_ld, const float* src, int64_t ld, int64_t r0,
                          int64_t t, int dh) {
  for (int idx = threadIdx.x; idx < kTile * dh; idx += blockDim.x) {
    const int r = idx / dh, d = idx - r * dh;
    dst[r * dst_ld + d] = r0 + r < t ? src[(r0 + r) * ld + d] : 0.f;
  }
}

// a . b over dh floats in shared memory: four chains (latency), combined in a fixed order.
__device__ __forceinline__ float dot(const float* a, const float* b, int dh) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int d = 0;
  for (; d + 4 <= dh; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < dh; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

using detail::warp_max;  // block_reduce.cuh
using detail::warp_sum;

// acc[c] += w_jj * rows[jj][lane + 32 c] for jj < n, w_jj being lane jj's w: a warp's
// weighted sum of n shared rows (row stride ld), each lane owning its dims.
template <int kC>
__device__ __forceinline__ void add_weighted_rows(float (&acc)[kC], float w, const float* rows,
                                                  int ld, int n, int dh) {
  const int lane = threadIdx.x % 32;
  for (int jj = 0; jj < n; ++jj) {
    const float wj = __shfl_sync(0xffffffffu, w, jj);
#pragma unroll
    for (int c = 0; c < kC; ++c)
      if (lane + 32 * c < dh) acc[c] += wj * rows[jj * ld + lane + 32 * c];
  }
}

// Forward. Block (bh, tile): queries q0..q0+31 of head bh, keys 0..end in tiles of 32.
// Shared: q [32][dh], k [32][dh + 1], v [32][dh]. Per row: running max m, sum l, acc[kC].
template <int kC>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(AttnShape s, AttnInputs in, float scale, float* out, float* lse) {
  extern __shared__ float smem[];
  const int dh = int(s.dh), pad = dh + 1, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float *qs = smem, *ks = qs + kTile * dh, *vs = ks + kTile * pad;
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t q0 = int64_t(gridDim.y - 1 - blockIdx.y) * kTile;  // longest rows start first
  const Head hd = head_at(in, bh, s.h);
  load_rows(qs, dh, hd.q, hd.qt, q0, t, dh);
  float m[kRows], l[kRows], acc[kRows][kC];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.f;
  }
  for (int64_t k0 = 0; k0 < math::attn_key_end(q0, t); k0 += kTile) {
    __syncthreads();  // the previous tile is read by every warp before it is overwritten
    load_rows(ks, pad, hd.k, hd.kt, k0, t, dh);
    load_rows(vs, dh, hd.v, hd.vt, k0, t, dh);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = warp * kRows + r;
      const int64_t tq = q0 + i;
      if (tq >= t) continue;  // the same for the whole warp
      const bool vis = math::attn_visible(tq, k0 + lane);
      const float sc = vis ? scale * dot(qs + i * dh, ks + lane * pad, dh) : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(sc));
      const float alpha = math::attn_rescale(m[r], m_new);
      const float p = vis ? expf(sc - m_new) : 0.f;
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kC; ++c) acc[r][c] *= alpha;
      const int n = int(tq - k0 + 1 < kTile ? tq - k0 + 1 : kTile);  // visible keys of the tile
      add_weighted_rows(acc[r], p, vs, dh, n, dh);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t tq = q0 + warp * kRows + r;
    if (tq >= t) continue;
    const float inv = 1.f / l[r];  // the CPU scales by the reciprocal too
#pragma unroll
    for (int c = 0; c < kC; ++c)
      if (lane + 32 * c < dh) out[(row0 + tq) * dh + lane + 32 * c] = acc[r][c] * inv;
    if (lane == 0) lse[row0 + tq] = math::attn_lse(m[r], l[r]);
  }
}

// Backward over query rows. Block (bh, tile): queries q0..q0+31, keys 0..end in tiles of 32.
// kGrad false: D_t = sum_j p_j dp_j, written to dq[t][0] (dq is the scratch for D). kGrad true:
// reads D there first, then overwrites the row with dq_t = sum_j ds_j k_j.
// Shared: q [32][dh], dout [32][dh], k [32][dh + 1], v [32][dh + 1].
template <int kC, bool kGrad>
__global__ void __launch_bounds__(kThreads)
    query_pass_kernel(AttnShape s, AttnInputs in, const float* dout, const float* lse, float scale,
                      float* dq) {
  extern __shared__ float smem[];
  const int dh = int(s.dh), pad = dh + 1, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float *qs = smem, *gs = qs + kTile * dh, *ks = gs + kTile * dh, *vs = ks + kTile * pad;
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t q0 = int64_t(gridDim.y - 1 - blockIdx.y) * kTile;
  const Head hd = head_at(in, bh, s.h);
  load_rows(qs, dh, hd.q, hd.qt, q0, t, dh);
  load_rows(gs, dh, dout + row0 * dh, dh, q0, t, dh);
  float row_lse[kRows], big_d[kRows], acc[kRows][kC];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t tq = q0 + warp * kRows + r;
    row_lse[r] = tq < t ? lse[row0 + tq] : 0.f;
    big_d[r] = (kGrad && tq < t) ? dq[(row0 + tq) * dh] : 0.f;  // read before any dq write
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.f;
  }
  for (int64_t k0 = 0; k0 < math::attn_key_end(q0, t); k0 += kTile) {
    __syncthreads();
    load_rows(ks, pad, hd.k, hd.kt, k0, t, dh);
    load_rows(vs, pad, hd.v, hd.vt, k0, t, dh);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = warp * kRows + r;
      const int64_t tq = q0 + i;
      if (tq >= t) continue;
      const bool vis = math::attn_visible(tq, k0 + lane);
      const float p =
          vis ? math::attn_prob(scale * dot(qs + i * dh, ks + lane * pad, dh), row_lse[r]) : 0.f;
      const float dp = vis ? dot(gs + i * dh, vs + lane * pad, dh) : 0.f;
      if constexpr (!kGrad) {
        big_d[r] += warp_sum(p * dp);
      } else {
        const float ds = vis ? math::attn_dscore(p, dp, big_d[r], scale) : 0.f;
        const int n = int(tq - k0 + 1 < kTile ? tq - k0 + 1 : kTile);
        add_weighted_rows(acc[r], ds, ks, pad, n, dh);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t tq = q0 + warp * kRows + r;
    if (tq >= t) continue;
    if constexpr (!kGrad) {
      if (lane == 0) dq[(row0 + tq) * dh] = big_d[r];
    } else {
#pragma unroll
      for (int c = 0; c < kC; ++c)
        if (lane + 32 * c < dh) dq[(row0 + tq) * dh + lane + 32 * c] = acc[r][c];
    }
  }
}

// Backward over key rows. Block (bh, tile): keys k0..k0+31, queries k0..T in tiles of 32 (no
// earlier query sees these keys). big_d[t * dh] is D_t (dq's first column, from the D pass).
// Shared: k [32][dh], v [32][dh], q [32][dh + 1], dout [32][dh + 1], lse [32], D [32].
template <int kC>
__global__ void __launch_bounds__(kThreads)
    key_pass_kernel(AttnShape s, AttnInputs in, const float* dout, const float* lse,
                    const float* big_d, float scale, float* dk, float* dv) {
  extern __shared__ float smem[];
  const int dh = int(s.dh), pad = dh + 1, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float *ks = smem, *vs = ks + kTile * dh, *qs = vs + kTile * dh, *gs = qs + kTile * pad;
  float *ls = gs + kTile * pad, *ds_row = ls + kTile;
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t k0 = int64_t(blockIdx.y) * kTile;  // the first key tiles have the most queries
  const Head hd = head_at(in, bh, s.h);
  load_rows(ks, dh, hd.k, hd.kt, k0, t, dh);
  load_rows(vs, dh, hd.v, hd.vt, k0, t, dh);
  float dk_acc[kRows][kC], dv_acc[kRows][kC];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kC; ++c) dk_acc[r][c] = dv_acc[r][c] = 0.f;
  for (int64_t q0 = k0; q0 < t; q0 += kTile) {
    __syncthreads();
    load_rows(qs, pad, hd.q, hd.qt, q0, t, dh);
    load_rows(gs, pad, dout + row0 * dh, dh, q0, t, dh);
    if (threadIdx.x < kTile) {
      const int64_t tq = q0 + threadIdx.x;
      ls[threadIdx.x] = tq < t ? lse[row0 + tq] : 0.f;
      ds_row[threadIdx.x] = tq < t ? big_d[(row0 + tq) * dh] : 0.f;
    }
    __syncthreads();
    const int n = int(t - q0 < kTile ? t - q0 : kTile);  // queries of the tile inside T
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = warp * kRows + r;
      const int64_t j = k0 + i, tq = q0 + lane;
      if (j >= t) continue;
      const bool vis = tq < t && math::attn_visible(tq, j);
      const float p =
          vis ? math::attn_prob(scale * dot(qs + lane * pad, ks + i * dh, dh), ls[lane]) : 0.f;
      const float dp = vis ? dot(gs + lane * pad, vs + i * dh, dh) : 0.f;
      const float ds = vis ? math::attn_dscore(p, dp, ds_row[lane], scale) : 0.f;
      add_weighted_rows(dv_acc[r], p, gs, pad, n, dh);
      add_weighted_rows(dk_acc[r], ds, qs, pad, n, dh);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t j = k0 + warp * kRows + r;
    if (j >= t) continue;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      if (lane + 32 * c >= dh) continue;
      dk[(row0 + j) * dh + lane + 32 * c] = dk_acc[r][c];
      dv[(row0 + j) * dh + lane + 32 * c] = dv_acc[r][c];
    }
  }
}

// Runs f(integral_constant<kC>) for kC = ceil(dh / 32), dh in [1, 128].
template <typename F>
void with_chunks(int64_t dh, F&& f) {
  switch ((dh + 31) / 32) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    default:
      f(std::integral_constant<int, 4>{});
  }
}

// Dynamic shared memory past 48 KiB must be asked for per kernel (Dh = 128 needs ~66 KiB).
template <typename Kernel>
void reserve_shared(Kernel* kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    COHORT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The grid of every kernel (heads, tiles of 32 rows) once the shape is checked; false when
// there is nothing to compute.
bool grid_for(const AttnShape& s, const char* what, dim3* grid) {
  if (s.b <= 0 || s.h <= 0 || s.t <= 0) return false;
  COHORT_CHECK_ARG(s.dh >= 1 && s.dh <= kMaxHeadDim, what, ": head dim ", s.dh, " must be in [1, ",
                   kMaxHeadDim, "]");
  const int64_t heads = s.b * s.h, tiles = (s.t + kTile - 1) / kTile;
  COHORT_CHECK_ARG(heads <= INT32_MAX && tiles <= 65535, what, ": B * H = ", heads,
                   " and T = ", s.t, " exceed the grid");
  *grid = dim3(unsigned(heads), unsigned(tiles));
  return true;
}

size_t floats(int64_t n) {
  return size_t(n) * sizeof(float);
}

}  // namespace

void causal_attention_forward(const AttnShape& s, const AttnInputs& in, float* out, float* lse,
                              cudaStream_t stream) {
  dim3 grid;
  if (!grid_for(s, "causal_attention_forward (cuda)", &grid)) return;
  const float scale = math::attn_scale(s.dh);
  const size_t bytes = floats(kTile * (3 * s.dh + 1));
  with_chunks(s.dh, [&](auto c) {
    constexpr int kC = decltype(c)::value;
    reserve_shared(forward_kernel<kC>, bytes);
    forward_kernel<kC><<<grid, kThreads, bytes, stream>>>(s, in, scale, out, lse);
  });
  COHORT_CUDA_CHECK_LAUNCH("causal_attention_forward");
}

// Three kernels in stream order: D into dq's first column; dk, dv per key tile (reading D);
// dq per query tile (reading its rows' D before overwriting them).
void causal_attention_backward(const AttnShape& s, const AttnInputs& in, const float* dout,
                               const float* lse, float* dq, float* dk, float* dv,
                               cudaStream_t stream) {
  dim3 grid;
  if (!grid_for(s, "causal_attention_backward (cuda)", &grid)) return;
  const float scale = math::attn_scale(s.dh);
  const size_t rows_bytes = floats(kTile * (4 * s.dh + 2));
  const size_t keys_bytes = rows_bytes + floats(2 * kTile);
  with_chunks(s.dh, [&](auto c) {
    constexpr int kC = decltype(c)::value;
    reserve_shared(query_pass_kernel<kC, false>, rows_bytes);
    query_pass_kernel<kC, false>
        <<<grid, kThreads, rows_bytes, stream>>>(s, in, dout, lse, scale, dq);
    COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward (D)");
    reserve_shared(key_pass_kernel<kC>, keys_bytes);
    key_pass_kernel<kC>
        <<<grid, kThreads, keys_bytes, stream>>>(s, in, dout, lse, dq, scale, dk, dv);
    COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward (dk, dv)");
    reserve_shared(query_pass_kernel<kC, true>, rows_bytes);
    query_pass_kernel<kC, true>
        <<<grid, kThreads, rows_bytes, stream>>>(s, in, dout, lse, scale, dq);
    COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward (dq)");
  });
}

}  // namespace cohort::cuda
