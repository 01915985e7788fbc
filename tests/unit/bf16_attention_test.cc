// train.precision = "bf16" in the fused causal attention: kernels/cpu's emulation of the GPU's
// tensor-core kernels (kernels/cpu/attention.h states the roundings) against the f32 attention
// on bf16-rounded q, k, v, and ops::causal_attention picking it forward and backward under
// MatmulPrecisionScope(kBF16). The GPU's kernels are compared with this emulation in
// tests/cuda/gpu/attention_kernel_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cohort/core/dtype.h"
#include "cohort/kernels/cpu/attention.h"
#include "cohort/ops/ops.h"
#include "tests/support/bf16_rounding.h"
#include "tests/support/stand_in_device.h"

namespace cohort {
namespace {

using ops::MatmulPrecision;

std::vector<float> rounded(std::vector<float> v) {
  return testing::rounded_to_bf16(std::move(v));
}

struct Grads {
  std::vector<float> out, lse, dq, dk, dv;
};

// q, k, v contiguous [B, H, T, Dh]; dout the upstream gradient. Forward then backward from its
// own lse, in f32 or in the bf16 emulation.
Grads run(const cpu::AttnShape& s, const std::vector<float>& q, const std::vector<float>& k,
          const std::vector<float>& v, const std::vector<float>& dout, bool bf16) {
  const size_t n = q.size(), rows = size_t(s.b * s.h * s.t);
  Grads r{std::vector<float>(n), std::vector<float>(rows), std::vector<float>(n),
          std::vector<float>(n), std::vector<float>(n)};
  const cpu::AttnStrides st{s.h * s.t * s.dh, s.t * s.dh, s.dh};
  const cpu::AttnInputs in{q.data(), k.data(), v.data(), st, st, st};
  if (bf16) {
    cpu::causal_attention_forward_bf16(s, in, r.out.data(), r.lse.data());
    cpu::causal_attention_backward_bf16(s, in, r.out.data(), dout.data(), r.lse.data(), r.dq.data(),
                                        r.dk.data(), r.dv.data());
  } else {
    cpu::causal_attention_forward(s, in, r.out.data(), r.lse.data());
    cpu::causal_attention_backward(s, in, dout.data(), r.lse.data(), r.dq.data(), r.dk.data(),
                                   r.dv.data());
  }
  return r;
}

float max_abs(const std::vector<float>& v) {
  float m = 0.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<float> values(int64_t n, uint64_t seed) {
  return randn({n}, seed).to_vector<float>();
}

// The only roundings past q, k, v are of p (forward and backward), dout and ds, each relative
// 2^-9: the emulation stays within 2% of the largest element of the f32 result on rounded
// inputs, and differs from it (the probabilities are rounded), and from f32 on the raw inputs.
TEST(Bf16Attention, EmulationIsF32OnRoundedInputsUpToTheRoundingOfPAndDs) {
  for (int64_t dh : {32, 64}) {
    const cpu::AttnShape s{2, 3, 130, dh};  // three key tiles of 64, the last partial
    const int64_t n = s.b * s.h * s.t * s.dh;
    const auto q = values(n, 1), k = values(n, 2), v = values(n, 3), g = values(n, 4);
    const Grads got = run(s, q, k, v, g, true);
    const Grads want = run(s, rounded(q), rounded(k), rounded(v), rounded(g), false);
    const Grads raw = run(s, q, k, v, g, false);
    const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>>
        pairs[] = {{"out", {&got.out, &want.out}},
                   {"lse", {&got.lse, &want.lse}},
                   {"dq", {&got.dq, &want.dq}},
                   {"dk", {&got.dk, &want.dk}},
                   {"dv", {&got.dv, &want.dv}}};
    for (const auto& [name, p] : pairs) {
      EXPECT_LE(max_diff(*p.first, *p.second), 2e-2f * max_abs(*p.second)) << name << ", Dh " << dh;
    }
    // lse sees no rounding past q and k: f32 up to the order of its sums.
    EXPECT_LE(max_diff(got.lse, want.lse), 1e-4f * max_abs(want.lse)) << "Dh " << dh;
    EXPECT_GT(max_diff(got.out, want.out), 0.f) << "p is rounded, Dh " << dh;
    EXPECT_GT(max_diff(got.dq, want.dq), 0.f) << "ds is rounded, Dh " << dh;
    EXPECT_GT(max_diff(got.out, raw.out), 0.f) << "q, k, v are rounded, Dh " << dh;
  }
}

// T = 1 (one visible key: p = 1, out = round(v) exactly) and a row whose scores are all equal.
TEST(Bf16Attention, OneKeyGivesTheRoundedValue) {
  const cpu::AttnShape s{1, 2, 1, 32};
  const auto q = values(64, 5), k = values(64, 6), v = values(64, 7), g = values(64, 8);
  const Grads got = run(s, q, k, v, g, true);
  EXPECT_EQ(got.out, rounded(v));
  EXPECT_EQ(got.dv, rounded(g)) << "dv = p round(dout) with p = 1";
  for (float x : got.dq) EXPECT_NEAR(x, 0.f, 1e-6f) << "ds = p (dp - D) = 0 for one key";
}

// Head dims the GPU's bf16 kernels are not built for run the f32 attention, on every device.
TEST(Bf16Attention, OtherHeadDimsAreF32) {
  EXPECT_TRUE(cpu::attn_bf16_head_dim(32) && cpu::attn_bf16_head_dim(64));
  EXPECT_FALSE(cpu::attn_bf16_head_dim(16) || cpu::attn_bf16_head_dim(80));
  const cpu::AttnShape s{1, 2, 70, 16};
  const int64_t n = s.b * s.h * s.t * s.dh;
  const auto q = values(n, 9), k = values(n, 10), v = values(n, 11), g = values(n, 12);
  const Grads got = run(s, q, k, v, g, true), want = run(s, q, k, v, g, false);
  EXPECT_EQ(got.out, want.out);
  EXPECT_EQ(got.dq, want.dq);
  EXPECT_EQ(got.dk, want.dk);
  EXPECT_EQ(got.dv, want.dv);
}

Tensor leaf(const Tensor& x) {
  Tensor l = x.clone_raw();
  l.set_requires_grad(true);
  return l;
}

// q, k or v (i = 0, 1, 2) of a [B, T, 3, H, Dh] projection as a [B, H, T, Dh] view.
Tensor head_view(const Tensor& qkv, int64_t i) {
  const Shape& s = qkv.shape();
  return ops::permute(ops::reshape(ops::slice(qkv, 2, i, i + 1), {s[0], s[1], s[3], s[4]}),
                      {0, 2, 1, 3});
}

// ops::causal_attention under MatmulPrecisionScope(kBF16) runs the bf16 kernels forward, and
// backward too when backward runs after the scope has ended (the node records the precision);
// q, k, v as permuted views of one qkv projection, as the GPT passes them.
std::vector<std::vector<float>> op_run(Device d, bool bf16) {
  const Tensor qkv0 = randn({2, 130, 3, 2, 32}, 13), g0 = randn({2, 2, 130, 32}, 14);
  Tensor qkv = leaf(qkv0.to(d));
  Tensor y;
  {
    ops::MatmulPrecisionScope scope(bf16 ? MatmulPrecision::kBF16 : MatmulPrecision::kF32);
    auto part = [&](int64_t i) { return head_view(qkv, i); };
    y = ops::causal_attention(part(0), part(1), part(2));
  }
  y.backward(g0.to(d));
  return {y.to(Device::cpu()).to_vector<float>(), qkv.grad().to(Device::cpu()).to_vector<float>()};
}

TEST(Bf16Attention, TheOpUsesTheBf16KernelsForwardAndBackward) {
  const auto got = op_run(Device::cpu(), true);
  // The same through the kernels directly, on contiguous copies of the views.
  const Tensor qkv0 = randn({2, 130, 3, 2, 32}, 13), g0 = randn({2, 2, 130, 32}, 14);
  auto part = [&](int64_t i) { return ops::contiguous(head_view(qkv0, i)).to_vector<float>(); };
  const cpu::AttnShape s{2, 2, 130, 32};
  const Grads want = run(s, part(0), part(1), part(2), g0.to_vector<float>(), true);
  EXPECT_EQ(got[0], want.out);
  // qkv's gradient [B, T, 3, H, Dh] holds dq, dk, dv side by side.
  std::vector<float> dqkv(got[1].size());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 130; ++t)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t d = 0; d < 32; ++d) {
            const std::vector<float>& src = i == 0 ? want.dq : i == 1 ? want.dk : want.dv;
            dqkv[size_t((((b * 130 + t) * 3 + i) * 2 + h) * 32 + d)] =
                src[size_t(((b * 2 + h) * 130 + t) * 32 + d)];
          }
  EXPECT_EQ(got[1], dqkv);
  const auto f32 = op_run(Device::cpu(), false);
  EXPECT_NE(got[0], f32[0]);
  EXPECT_NE(got[1], f32[1]);
}

// On a device (the stand-in: the CPU's kernels behind cuda:0's table) the op picks the table's
// bf16 entries and gives the CPU's bits.
TEST(Bf16Attention, TheDeviceTableIsUsedAndMatchesTheCpu) {
  testing::StandInGpu gpu;
  const auto on_gpu = op_run(Device::cuda(0), true);
  EXPECT_EQ(on_gpu, op_run(Device::cpu(), true));
}

}  // namespace
}  // namespace cohort
