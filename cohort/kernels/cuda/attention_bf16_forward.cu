// causal_attention_forward_bf16 (attention.h): FlashAttention-2's forward on bf16 tensor cores.
// Layout and shared helpers: attention_bf16.cuh; semantics: kernels/cpu/attention.h.
#include "cohort/kernels/cuda/attention_bf16.cuh"

namespace cohort::cuda::bf16_attn {
namespace {

// Block (bh, tile): queries q0..q0+63 of head bh; keys 0..end in tiles of 64 (only tiles with a
// key at or before the block's last query: the causal skip). Per key tile, warp w:
//   S = Q_w K^T (wmma, f32) into its rows of `ss`; the online softmax per row in f32, P =
//   exp(S - m) rounded to bf16 into `ps` and the rescale factor into `alpha`; P V (wmma, f32)
//   into its rows of `ss` (S is spent), then O = alpha O + P V on the f32 `os` rows.
// O lives in shared memory, not in accumulator fragments, because a fragment's element-to-row
// map is unspecified and the rescale is per row.
// Shared: q, k, v bf16 [64][Dh + 8]; p bf16 [64][72]; s f32 [64][68]; o f32 [64][Dh + 4];
// alpha f32 [64].
template <int kDh>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(AttnShape s, AttnInputs in, float scale, bool vec, float* out, float* lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ldh = ld_rows<kDh>(), ldo = kDh + 4;
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* ks = qs + kTile * ldh;
  bf16* vs = ks + kTile * ldh;
  bf16* ps = vs + kTile * ldh;
  float* ss = reinterpret_cast<float*>(ps + kTile * kLdP);
  float* os = ss + kTile * kLdS;
  float* alpha_s = os + kTile * ldo;

  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;  // the warp's first row
  const int64_t bh = blockIdx.x, t = s.t, row0 = bh * t;
  const int64_t q0 = int64_t(gridDim.y - 1 - blockIdx.y) * kTile;  // longest rows start first
  const Head hd = head_of(in, bh, s.h);
  load_tile<kDh>(qs, hd.q, hd.qt, q0, t, vec);
  for (int i = threadIdx.x; i < kTile * ldo; i += kThreads) os[i] = 0.f;
  float m[16], l[16];  // the warp's rows' running max and sum (every lane holds all 16)
#pragma unroll
  for (int r = 0; r < 16; ++r) m[r] = -INFINITY, l[r] = 0.f;

  for (int64_t k0 = 0; k0 < math::attn_bf16_key_end(q0, t); k0 += kTile) {
    __syncthreads();  // every warp is done with the previous K, V (and q, o are written)
    load_tile<kDh>(ks, hd.k, hd.kt, k0, t, vec);
    load_tile<kDh>(vs, hd.v, hd.vt, k0, t, vec);
    __syncthreads();
    rows_dot_tile<kDh>(ss + w0 * kLdS, kLdS, qs + w0 * ldh, ldh, ks, ldh);
    __syncwarp();
    // Softmax: lane owns keys lane and lane + 32 of each row. Every row of the block sees the
    // tile's first key (k0 <= q0), so a row's max is finite once it is inside T.
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int i = w0 + r;
      const int64_t tq = q0 + i;
      float p0 = 0.f, p1 = 0.f, alpha = 1.f;
      if (tq < t) {  // the same for the whole warp
        const bool v0 = math::attn_visible(tq, k0 + lane);
        const bool v1 = math::attn_visible(tq, k0 + lane + 32);
        const float s0 = v0 ? scale * ss[i * kLdS + lane] : -INFINITY;
        const float s1 = v1 ? scale * ss[i * kLdS + lane + 32] : -INFINITY;
        const float m_new = fmaxf(m[r], warp_max(fmaxf(s0, s1)));
        alpha = math::attn_rescale(m[r], m_new);
        p0 = v0 ? expf(s0 - m_new) : 0.f;
        p1 = v1 ? expf(s1 - m_new) : 0.f;
        l[r] = l[r] * alpha + warp_sum(p0 + p1);  // the f32 p, before rounding
        m[r] = m_new;
      }
      ps[i * kLdP + lane] = __float2bfloat16_rn(p0);
      ps[i * kLdP + lane + 32] = __float2bfloat16_rn(p1);
      if (lane == 0) alpha_s[i] = alpha;
    }
    __syncwarp();  // p and alpha written, s read: the warp's rows of ss may take P V
    FragC pv[kDh / 16];
#pragma unroll
    for (int n = 0; n < kDh / 16; ++n) wmma::fill_fragment(pv[n], 0.f);
    add_rows_times_tile<kDh>(pv, ps + w0 * kLdP, kLdP, vs, ldh);
#pragma unroll
    for (int n = 0; n < kDh / 16; ++n)
      wmma::store_matrix_sync(ss + w0 * kLdS + n * 16, pv[n], kLdS, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 16 * kDh; e += 32) {
      const int i = w0 + e / kDh, d = e % kDh;
      os[i * ldo + d] = alpha_s[i] * os[i * ldo + d] + ss[i * kLdS + d];
    }
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int i = w0 + r;
    const int64_t tq = q0 + i;
    if (tq >= t) continue;
    const float inv = 1.f / l[r];  // the CPU scales by the reciprocal too
    for (int d = lane; d < kDh; d += 32) out[(row0 + tq) * kDh + d] = os[i * ldo + d] * inv;
    if (lane == 0) lse[row0 + tq] = math::attn_lse(m[r], l[r]);
  }
}

// The shared memory of forward_kernel<kDh>: about 70 KiB for Dh = 64.
template <int kDh>
size_t forward_bytes() {
  return size_t(3 * kTile * ld_rows<kDh>() + kTile * kLdP) * sizeof(bf16) +
         size_t(kTile * kLdS + kTile * (kDh + 4) + kTile) * sizeof(float);
}

template <int kDh>
void launch_forward(const AttnShape& s, const AttnInputs& in, dim3 grid, float* out, float* lse,
                    cudaStream_t stream) {
  const size_t bytes = forward_bytes<kDh>();
  reserve_shared(forward_kernel<kDh>, bytes);
  forward_kernel<kDh>
      <<<grid, kThreads, bytes, stream>>>(s, in, math::attn_scale(s.dh), quad_loads(in), out, lse);
}

}  // namespace
}  // namespace cohort::cuda::bf16_attn

namespace cohort::cuda {

void causal_attention_forward_bf16(const AttnShape& s, const AttnInputs& in, float* out, float* lse,
                                   cudaStream_t stream) {
  if (!math::attn_bf16_head_dim(s.dh)) return causal_attention_forward(s, in, out, lse, stream);
  dim3 grid;
  if (!bf16_attn::grid_for(s, "causal_attention_forward_bf16 (cuda)", &grid)) return;
  if (s.dh == 32)
    bf16_attn::launch_forward<32>(s, in, grid, out, lse, stream);
  else
    bf16_attn::launch_forward<64>(s, in, grid, out, lse, stream);
  COHORT_CUDA_CHECK_LAUNCH("causal_attention_forward_bf16");
}

}  // namespace cohort::cuda
