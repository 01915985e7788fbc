// The fused attention kernels' arithmetic (attention_math.h) run on the host in
// the kernels' own tiling: forward's online softmax over 32-key tiles, backward's three passes
// (D per query row, dk/dv per key tile, dq per query tile). Checked against
// kernels/cpu/attention on every machine, so what is left for the GPU test is the launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cohort/kernels/cpu/attention.h"
#include "cohort/kernels/cuda/attention_math.h"
#include "tests/cuda/random_floats.h"

namespace cohort::cuda::math {
namespace {

constexpr int64_t kTile = kAttnTile;

using testing::random_floats;

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One head, contiguous [T, Dh] rows.
struct Head {
  const float *q, *k, *v;
  int64_t t, dh;
  const float* row(const float* m, int64_t i) const { return m + i * dh; }
  float score(int64_t tq, int64_t j) const {
    return attn_scale(dh) * dot(row(q, tq), row(k, j), dh);
  }
};

// forward_kernel for one query row: key tiles up to its tile's end, online softmax.
void forward_row(const Head& h, int64_t tq, float* out, float* lse) {
  const int64_t q0 = tq / kTile * kTile;
  float m = -INFINITY, l = 0.f;
  std::vector<float> acc(size_t(h.dh), 0.f);
  for (int64_t k0 = 0; k0 < attn_key_end(q0, h.t); k0 += kTile) {
    float s[kTile], tile_max = -INFINITY;
    for (int64_t jj = 0; jj < kTile; ++jj) {
      s[jj] = attn_visible(tq, k0 + jj) ? h.score(tq, k0 + jj) : -INFINITY;
      tile_max = std::max(tile_max, s[jj]);
    }
    const float m_new = std::max(m, tile_max), alpha = attn_rescale(m, m_new);
    float tile_sum = 0.f;
    for (float& a : acc) a *= alpha;
    for (int64_t jj = 0; jj < kTile; ++jj) {
      if (s[jj] == -INFINITY) continue;
      const float p = std::exp(s[jj] - m_new);
      tile_sum += p;
      for (int64_t d = 0; d < h.dh; ++d) acc[size_t(d)] += p * h.row(h.v, k0 + jj)[d];
    }
    l = l * alpha + tile_sum;
    m = m_new;
  }
  const float inv = 1.f / l;
  for (int64_t d = 0; d < h.dh; ++d) out[d] = acc[size_t(d)] * inv;
  *lse = attn_lse(m, l);
}

// The three backward passes for one head; g = dout, contiguous like q.
void backward_head(const Head& h, const float* g, const float* lse, float* dq, float* dk,
                   float* dv) {
  auto p_of = [&](int64_t tq, int64_t j) { return attn_prob(h.score(tq, j), lse[tq]); };
  auto dp_of = [&](int64_t tq, int64_t j) { return dot(h.row(g, tq), h.row(h.v, j), h.dh); };
  std::vector<float> big_d(size_t(h.t), 0.f);
  for (int64_t tq = 0; tq < h.t; ++tq)  // query pass 1: D
    for (int64_t j = 0; j < attn_key_end(tq / kTile * kTile, h.t); ++j)
      if (attn_visible(tq, j)) big_d[size_t(tq)] += p_of(tq, j) * dp_of(tq, j);
  std::fill(dk, dk + h.t * h.dh, 0.f);
  std::fill(dv, dv + h.t * h.dh, 0.f);
  for (int64_t j = 0; j < h.t; ++j)  // key pass: queries from the key's tile on
    for (int64_t tq = j / kTile * kTile; tq < h.t; ++tq) {
      if (!attn_visible(tq, j)) continue;
      const float p = p_of(tq, j),
                  ds = attn_dscore(p, dp_of(tq, j), big_d[size_t(tq)], attn_scale(h.dh));
      for (int64_t d = 0; d < h.dh; ++d) {
        dv[j * h.dh + d] += p * h.row(g, tq)[d];
        dk[j * h.dh + d] += ds * h.row(h.q, tq)[d];
      }
    }
  std::fill(dq, dq + h.t * h.dh, 0.f);
  for (int64_t tq = 0; tq < h.t; ++tq)  // query pass 2: dq
    for (int64_t j = 0; j < attn_key_end(tq / kTile * kTile, h.t); ++j) {
      if (!attn_visible(tq, j)) continue;
      const float ds = attn_dscore(p_of(tq, j), dp_of(tq, j), big_d[size_t(tq)], attn_scale(h.dh));
      for (int64_t d = 0; d < h.dh; ++d) dq[tq * h.dh + d] += ds * h.row(h.k, j)[d];
    }
}

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want,
                                 float rtol, float atol) {
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": tiled " << got[i] << ", cpu " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(AttentionMath, ScalarFormulas) {
  EXPECT_EQ(attn_scale(64), 0.125f);
  EXPECT_EQ(attn_scale(80), 1.0f / std::sqrt(80.0f));
  EXPECT_TRUE(attn_visible(5, 5));
  EXPECT_FALSE(attn_visible(5, 6));
  EXPECT_EQ(attn_key_end(0, 17), 17);
  EXPECT_EQ(attn_key_end(32, 130), 64);
  EXPECT_EQ(attn_key_end(128, 130), 130);
  EXPECT_EQ(attn_rescale(-INFINITY, 3.f), 0.f);  // nothing accumulated yet, never NaN
  EXPECT_EQ(attn_rescale(-INFINITY, -INFINITY), 0.f);
  EXPECT_EQ(attn_rescale(2.f, 2.f), 1.f);
  EXPECT_FLOAT_EQ(attn_rescale(1.f, 3.f), std::exp(-2.f));
  EXPECT_FLOAT_EQ(attn_lse(2.f, 3.f), 2.f + std::log(3.f));
  EXPECT_EQ(attn_prob(1.5f, 1.5f), 1.f);
  // kernels/cpu: ds = scale * p[j] * (dp[j] - big_d), the same float operations.
  const float scale = 0.125f, p = 0.3f, dp = 1.7f, big_d = -0.4f;
  EXPECT_EQ(attn_dscore(p, dp, big_d, scale), scale * p * (dp - big_d));
}

struct Case {
  int64_t t, dh;
};

class AttentionTiling : public ::testing::TestWithParam<Case> {};

// Two heads (B = 1, H = 2), contiguous: the tiled forward and backward against kernels/cpu.
TEST_P(AttentionTiling, MatchesCpuKernels) {
  const auto [t, dh] = GetParam();
  const int64_t heads = 2, n = heads * t * dh;
  const size_t sz = size_t(n), rows = size_t(heads * t);
  const auto q = random_floats(sz, 1), k = random_floats(sz, 2), v = random_floats(sz, 3),
             g = random_floats(sz, 4);
  const cpu::AttnShape s{1, heads, t, dh};
  const cpu::AttnStrides st{heads * t * dh, t * dh, dh};
  const cpu::AttnInputs in{q.data(), k.data(), v.data(), st, st, st};
  std::vector<float> out(sz), lse(rows), dq(sz), dk(sz), dv(sz);
  cpu::causal_attention_forward(s, in, out.data(), lse.data());
  cpu::causal_attention_backward(s, in, g.data(), lse.data(), dq.data(), dk.data(), dv.data());

  std::vector<float> t_out(sz), t_lse(rows), t_dq(sz), t_dk(sz), t_dv(sz);
  for (int64_t bh = 0; bh < heads; ++bh) {
    const int64_t off = bh * t * dh;
    const Head h{q.data() + off, k.data() + off, v.data() + off, t, dh};
    for (int64_t tq = 0; tq < t; ++tq)
      forward_row(h, tq, t_out.data() + off + tq * dh, t_lse.data() + bh * t + tq);
    backward_head(h, g.data() + off, t_lse.data() + bh * t, t_dq.data() + off, t_dk.data() + off,
                  t_dv.data() + off);
  }
  EXPECT_TRUE(close(t_out, out, 1e-4f, 1e-5f)) << "out, T " << t << ", Dh " << dh;
  EXPECT_TRUE(close(t_lse, lse, 1e-5f, 1e-5f)) << "lse, T " << t << ", Dh " << dh;
  EXPECT_TRUE(close(t_dq, dq, 1e-3f, 1e-5f)) << "dq, T " << t << ", Dh " << dh;
  EXPECT_TRUE(close(t_dk, dk, 1e-3f, 1e-5f)) << "dk, T " << t << ", Dh " << dh;
  EXPECT_TRUE(close(t_dv, dv, 1e-3f, 1e-5f)) << "dv, T " << t << ", Dh " << dh;
}

// T around the tile edges (1, a partial tile, exactly 2 tiles, one past) and Dh below, at and
// above a warp's width.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTiling,
                         ::testing::Values(Case{1, 16}, Case{17, 16}, Case{33, 80}, Case{64, 64},
                                           Case{65, 7}, Case{130, 80}));

// The bf16 kernels' tiles (attention_bf16_*.cu): the forward and dq blocks' key tiles up to
// attn_bf16_key_end, and the dk/dv blocks' query tiles from their own key tile to T, together
// with attn_visible, visit every causal pair (t, j <= t) exactly once and nothing else; and the
// head dims built are those kernels/cpu's emulation treats as bf16.
TEST(AttentionBf16Tiling, EveryCausalPairOnceFromBothSides) {
  constexpr int64_t kB = kAttnBf16Tile;
  EXPECT_EQ(kB, cpu::kAttnBf16Tile);
  EXPECT_TRUE(attn_bf16_head_dim(32) && attn_bf16_head_dim(64) && !attn_bf16_head_dim(128));
  for (int64_t t : {1, 63, 64, 65, 130, 1024}) {
    const int64_t tiles = (t + kB - 1) / kB;
    std::vector<int> by_query(size_t(t * t), 0), by_key(size_t(t * t), 0);
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t q0 = tile * kB;
      for (int64_t k0 = 0; k0 < attn_bf16_key_end(q0, t); k0 += kB)
        for (int64_t i = 0; i < kB; ++i)
          for (int64_t c = 0; c < kB; ++c)
            if (q0 + i < t && attn_visible(q0 + i, k0 + c))
              ++by_query[size_t((q0 + i) * t + k0 + c)];
      const int64_t k0 = tile * kB;
      for (int64_t qq = k0; qq < t; qq += kB)
        for (int64_t i = 0; i < kB; ++i)
          for (int64_t c = 0; c < kB; ++c)
            if (qq + c < t && attn_visible(qq + c, k0 + i)) ++by_key[size_t((qq + c) * t + k0 + i)];
    }
    for (int64_t tq = 0; tq < t; ++tq)
      for (int64_t j = 0; j < t; ++j) {
        ASSERT_EQ(by_query[size_t(tq * t + j)], j <= tq ? 1 : 0)
            << "T " << t << " (" << tq << ", " << j << ")";
        ASSERT_EQ(by_key[size_t(tq * t + j)], j <= tq ? 1 : 0)
            << "T " << t << " (" << tq << ", " << j << ")";
      }
  }
}

}  // namespace
}  // namespace cohort::cuda::math
