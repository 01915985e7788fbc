// causal_attention_backward_bf16 (attention.h): FlashAttention-2's backward on bf16 tensor cores,
// in three kernels so that every output element is written by one thread (no atomics, the same
// bits on every run): D_t = bf16(dout_t) . out_t into dq's first column; dk, dv per key tile; dq
// per query tile (reading its rows' D first). Layout and shared helpers: attention_bf16.cuh;
// semantics: kernels/cpu/attention.h.
#include "cohort/kernels/cuda/attention_bf16.cuh"

namespace cohort::cuda::bf16_attn {
namespace {

// One warp per row of the [rows, kDh] out and dout: D = bf16(dout) . out in f32, written to
// dq[row][0].
template <int kDh>
__global__ void __launch_bounds__(kThreads)
    d_kernel(int64_t rows, const float* out, const float* dout, float* dq) {
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp
  float acc = 0.f;
  for (int d = lane; d < kDh; d += 32)
    acc += __bfloat162float(__float2bfloat16_rn(dout[row * kDh + d])) * out[row * kDh + d];
  acc = warp_sum(acc);
  if (lane == 0) dq[row * kDh] = acc;
}

// Block (bh, tile): keys k0..k0+63 of head bh, queries k0..T in tiles of 64 (no earlier query
// sees these keys). Per query tile, warp w (its 16 keys):
//   S^T = K_w Q^T and dP^T = V_w dO^T (wmma, f32) into its rows of st, dpt; then p = exp(scale
//   S - lse) and ds = scale p (dP - D) in f32, rounded to bf16 into pt, dst; then
//   dV_w += P^T dO and dK_w += dS^T Q in accumulator fragments (no rescale: they stay there).
// big_d[t * kDh] is D_t (dq's first column, from d_kernel).
// Shared: k, v, q, dout bf16 [64][Dh + 8]; st, dpt f32 [64][68]; pt, dst bf16 [64][72]; lse, D
// f32 [64].
template <int kDh>
__global__ void __launch_bounds__(kThreads)
    key_kernel(AttnShape s, AttnInputs in, const float* dout, const float* lse, const float* big_d,
               float scale, bool vec, float* dk, float* dv) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ldh = ld_rows<kDh>();
  bf16* ks = reinterpret_cast<bf16*>(smem);
  bf16* vs = ks + kTile * ldh;
  bf16* qs = vs + kTile * ldh;
  bf16* gs = qs + kTile * ldh;
  bf16* pt = gs + kTile * ldh;
  bf16* dst = pt + kTile * kLdP;
  float* st = reinterpret_cast<float*>(dst + kTile * kLdP);
  float* dpt = st + kTile * kLdS;
  float* ls = dpt + kTile * kLdS;
  float* dd = ls + kTile;

  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t k0 = int64_t(blockIdx.y) * kTile;  // the first key tiles have the most queries
  const Head hd = head_of(in, bh, s.h);
  load_tile<kDh>(ks, hd.k, hd.kt, k0, t, vec);
  load_tile<kDh>(vs, hd.v, hd.vt, k0, t, vec);
  FragC dk_acc[kDh / 16], dv_acc[kDh / 16];
#pragma unroll
  for (int n = 0; n < kDh / 16; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.f);
    wmma::fill_fragment(dv_acc[n], 0.f);
  }
  for (int64_t q0 = k0; q0 < t; q0 += kTile) {
    __syncthreads();  // every warp is done with the previous q, dout, lse, D
    load_tile<kDh>(qs, hd.q, hd.qt, q0, t, vec);
    load_tile<kDh>(gs, dout + row0 * kDh, kDh, q0, t, vec);
    if (threadIdx.x < kTile) {
      const int64_t tq = q0 + threadIdx.x;
      ls[threadIdx.x] = tq < t ? lse[row0 + tq] : 0.f;
      dd[threadIdx.x] = tq < t ? big_d[(row0 + tq) * kDh] : 0.f;
    }
    __syncthreads();
    rows_dot_tile<kDh>(st + w0 * kLdS, kLdS, ks + w0 * ldh, ldh, qs, ldh);
    rows_dot_tile<kDh>(dpt + w0 * kLdS, kLdS, vs + w0 * ldh, ldh, gs, ldh);
    __syncwarp();
    for (int e = lane; e < 16 * kTile; e += 32) {
      const int i = w0 + e / kTile, c = e % kTile;  // key row i, query column c
      const int64_t j = k0 + i, tq = q0 + c;
      float p = 0.f, ds = 0.f;
      if (tq < t && math::attn_visible(tq, j)) {
        p = math::attn_prob(scale * st[i * kLdS + c], ls[c]);
        ds = math::attn_dscore(p, dpt[i * kLdS + c], dd[c], scale);
      }
      pt[i * kLdP + c] = __float2bfloat16_rn(p);
      dst[i * kLdP + c] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    add_rows_times_tile<kDh>(dv_acc, pt + w0 * kLdP, kLdP, gs, ldh);
    add_rows_times_tile<kDh>(dk_acc, dst + w0 * kLdP, kLdP, qs, ldh);
  }
  // Out through the warp's own rows of st and dpt: rows past T are not written.
  __syncwarp();
#pragma unroll
  for (int n = 0; n < kDh / 16; ++n) {
    wmma::store_matrix_sync(st + w0 * kLdS + n * 16, dk_acc[n], kLdS, wmma::mem_row_major);
    wmma::store_matrix_sync(dpt + w0 * kLdS + n * 16, dv_acc[n], kLdS, wmma::mem_row_major);
  }
  __syncwarp();
  for (int e = lane; e < 16 * kDh; e += 32) {
    const int i = w0 + e / kDh, d = e % kDh;
    const int64_t j = k0 + i;
    if (j >= t) continue;
    dk[(row0 + j) * kDh + d] = st[i * kLdS + d];
    dv[(row0 + j) * kDh + d] = dpt[i * kLdS + d];
  }
}

// Block (bh, tile): queries q0..q0+63 of head bh, keys 0..end in tiles of 64. Reads its rows'
// D from dq's first column, then per key tile, warp w (its 16 queries): S = Q_w K^T and
// dP = dO_w V^T (wmma, f32) into its rows of sc, dp; ds in f32 as key_kernel's (the same
// float operations on the same values), rounded to bf16 into dss; dQ_w += dS K in fragments.
// Shared: q, dout, k, v bf16 [64][Dh + 8]; sc, dp f32 [64][68]; dss bf16 [64][72]; lse, D f32
// [64].
template <int kDh>
__global__ void __launch_bounds__(kThreads)
    query_kernel(AttnShape s, AttnInputs in, const float* dout, const float* lse, float scale,
                 bool vec, float* dq) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ldh = ld_rows<kDh>();
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* gs = qs + kTile * ldh;
  bf16* ks = gs + kTile * ldh;
  bf16* vs = ks + kTile * ldh;
  bf16* dss = vs + kTile * ldh;
  float* sc = reinterpret_cast<float*>(dss + kTile * kLdP);
  float* dp = sc + kTile * kLdS;
  float* ls = dp + kTile * kLdS;
  float* dd = ls + kTile;

  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t q0 = int64_t(gridDim.y - 1 - blockIdx.y) * kTile;  // longest rows start first
  const Head hd = head_of(in, bh, s.h);
  load_tile<kDh>(qs, hd.q, hd.qt, q0, t, vec);
  load_tile<kDh>(gs, dout + row0 * kDh, kDh, q0, t, vec);
  if (threadIdx.x < kTile) {
    const int64_t tq = q0 + threadIdx.x;
    ls[threadIdx.x] = tq < t ? lse[row0 + tq] : 0.f;
    dd[threadIdx.x] = tq < t ? dq[(row0 + tq) * kDh] : 0.f;  // D, read before any dq write
  }
  FragC acc[kDh / 16];
#pragma unroll
  for (int n = 0; n < kDh / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
  for (int64_t k0 = 0; k0 < math::attn_bf16_key_end(q0, t); k0 += kTile) {
    __syncthreads();  // every warp is done with the previous K, V (and q, dout, lse, D loaded)
    load_tile<kDh>(ks, hd.k, hd.kt, k0, t, vec);
    load_tile<kDh>(vs, hd.v, hd.vt, k0, t, vec);
    __syncthreads();
    rows_dot_tile<kDh>(sc + w0 * kLdS, kLdS, qs + w0 * ldh, ldh, ks, ldh);
    rows_dot_tile<kDh>(dp + w0 * kLdS, kLdS, gs + w0 * ldh, ldh, vs, ldh);
    __syncwarp();
    for (int e = lane; e < 16 * kTile; e += 32) {
      const int i = w0 + e / kTile, c = e % kTile;  // query row i, key column c
      const int64_t tq = q0 + i, j = k0 + c;
      float ds = 0.f;
      if (tq < t && math::attn_visible(tq, j)) {
        const float p = math::attn_prob(scale * sc[i * kLdS + c], ls[i]);
        ds = math::attn_dscore(p, dp[i * kLdS + c], dd[i], scale);
      }
      dss[i * kLdP + c] = __float2bfloat16_rn(ds);
    }
    __syncwarp();
    add_rows_times_tile<kDh>(acc, dss + w0 * kLdP, kLdP, ks, ldh);
  }
  __syncthreads();  // every D of the block is read before its rows of dq are overwritten
#pragma unroll
  for (int n = 0; n < kDh / 16; ++n)
    wmma::store_matrix_sync(sc + w0 * kLdS + n * 16, acc[n], kLdS, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 16 * kDh; e += 32) {
    const int i = w0 + e / kDh, d = e % kDh;
    const int64_t tq = q0 + i;
    if (tq < t) dq[(row0 + tq) * kDh + d] = sc[i * kLdS + d];
  }
}

// Shared memory: about 89 KiB (key_kernel) and 80 KiB (query_kernel) for Dh = 64.
template <int kDh>
size_t key_bytes() {
  return size_t(4 * kTile * ld_rows<kDh>() + 2 * kTile * kLdP) * sizeof(bf16) +
         size_t(2 * kTile * kLdS + 2 * kTile) * sizeof(float);
}

template <int kDh>
size_t query_bytes() {
  return size_t(4 * kTile * ld_rows<kDh>() + kTile * kLdP) * sizeof(bf16) +
         size_t(2 * kTile * kLdS + 2 * kTile) * sizeof(float);
}

template <int kDh>
void launch_backward(const AttnShape& s, const AttnInputs& in, dim3 grid, const float* out,
                     const float* dout, const float* lse, float* dq, float* dk, float* dv,
                     cudaStream_t stream) {
  const float scale = math::attn_scale(s.dh);
  const bool vec = quad_loads(in, out, dout);
  const int64_t rows = s.b * s.h * s.t;
  const int64_t d_blocks = (rows + kWarps - 1) / kWarps;
  COHORT_CHECK_ARG(d_blocks <= INT32_MAX, "causal_attention_backward_bf16: B * H * T = ", rows,
                   " exceeds the grid");
  d_kernel<kDh><<<unsigned(d_blocks), kThreads, 0, stream>>>(rows, out, dout, dq);
  COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward_bf16 (D)");
  reserve_shared(key_kernel<kDh>, key_bytes<kDh>());
  key_kernel<kDh>
      <<<grid, kThreads, key_bytes<kDh>(), stream>>>(s, in, dout, lse, dq, scale, vec, dk, dv);
  COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward_bf16 (dk, dv)");
  reserve_shared(query_kernel<kDh>, query_bytes<kDh>());
  query_kernel<kDh>
      <<<grid, kThreads, query_bytes<kDh>(), stream>>>(s, in, dout, lse, scale, vec, dq);
  COHORT_CUDA_CHECK_LAUNCH("causal_attention_backward_bf16 (dq)");
}

}  // namespace
}  // namespace cohort::cuda::bf16_attn

namespace cohort::cuda {

void causal_attention_backward_bf16(const AttnShape& s, const AttnInputs& in, const float* out,
                                    const float* dout, const float* lse, float* dq, float* dk,
                                    float* dv, cudaStream_t stream) {
  if (!math::attn_bf16_head_dim(s.dh))
    return causal_attention_backward(s, in, dout, lse, dq, dk, dv, stream);
  dim3 grid;
  if (!bf16_attn::grid_for(s, "causal_attention_backward_bf16 (cuda)", &grid)) return;
  if (s.dh == 32)
    bf16_attn::launch_backward<32>(s, in, grid, out, dout, lse, dq, dk, dv, stream);
  else
    bf16_attn::launch_backward<64>(s, in, grid, out, dout, lse, dq, dk, dv, stream);
}

}  // namespace cohort::cuda
