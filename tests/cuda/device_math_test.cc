// The arithmetic the CUDA kernels run per element or per row (kernels/cuda/device_math.h),
// checked on the CPU against kernels/cpu and known values: it runs on every machine, GPU or not.
#include "cohort/kernels/cuda/device_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cohort/kernels/cpu/elementwise.h"
#include "cohort/kernels/cpu/norm.h"
#include "cohort/kernels/cpu/softmax.h"
#include "tests/cuda/random_floats.h"

namespace cohort::cuda::math {
namespace {

using testing::random_floats;

TEST(DeviceMath, Bf16RoundsToNearestEvenLikeTorch) {
  // Values whose bf16 roundings torch gives (torch.tensor(x).to(torch.bfloat16)).
  EXPECT_EQ(bf16_from_f32(1.0f), 0x3f80);
  EXPECT_EQ(bf16_from_f32(-2.0f), 0xc000);
  EXPECT_EQ(f32_from_bf16(bf16_from_f32(3.14159265f)), 3.140625f);
  // Exactly half-way between two bf16 values: ties go to the even one.
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f808000u)), 0x3f80);  // 1 + 2^-8 -> 1
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f818000u)), 0x3f82);  // 1 + 3 * 2^-8 -> up
  EXPECT_EQ(bf16_from_f32(f32_from_bits(0x3f808001u)), 0x3f81);  // just past half: up
  EXPECT_EQ(bf16_from_f32(INFINITY), 0x7f80);
  EXPECT_EQ(bf16_from_f32(-INFINITY), 0xff80);
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf16_from_f32(NAN))));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf16_from_f32(f32_from_bits(0x7f800001u)))));
  EXPECT_EQ(bf16_from_f32(3.4e38f), 0x7f80);  // past bf16's largest finite value: infinity
}

TEST(DeviceMath, Bf16RelativeErrorIsAtMostHalfAnUlp) {
  for (float x : random_floats(10000, 1, -1e6f, 1e6f)) {
    const float r = f32_from_bf16(bf16_from_f32(x));
    EXPECT_LE(std::fabs(r - x), std::fabs(x) * 0x1p-8f) << x;
  }
}

TEST(DeviceMath, UnaryOpsMatchTheCpuKernels) {
  const auto x = random_floats(4097, 2, -8.f, 8.f);
  std::vector<float> want(x.size());
  for (int op = 0; op < 7; ++op) {
    std::vector<float> in = x;
    if (op >= 5)
      for (float& v : in) v = std::fabs(v) + 1e-3f;  // log, sqrt
    cpu::unary(cpu::UnaryOp(op), in.data(), want.data(), int64_t(in.size()));
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_NEAR(apply_unary(Unary(op), in[i]), want[i], 2e-6f * std::fabs(want[i]) + 1e-6f)
          << "op " << op << " at " << in[i];
  }
}

TEST(DeviceMath, GeluGradientMatchesTheCpuKernel) {
  const auto x = random_floats(4097, 3, -8.f, 8.f);
  std::vector<float> ones(x.size(), 1.f), want(x.size());
  cpu::gelu_backward(x.data(), ones.data(), want.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(gelu_grad(x[i]), want[i], 1e-5f * std::fabs(want[i]) + 1e-6f) << x[i];
}

TEST(DeviceMath, BinaryOpsFollowTheCpuEnumOrder) {
  const float a = 3.f, b = -4.f;
  float want = 0;
  for (int op = 0; op < 4; ++op) {
    cpu::binary(cpu::BinaryOp(op), &a, &b, &want, 1);
    EXPECT_EQ(apply_binary(Binary(op), a, b), want) << "op " << op;
  }
}

// Online softmax: any split of a row into pieces, merged in any order, gives the row's
// log-sum-exp, which the CPU's log_softmax implies (x - log_softmax(x)).
TEST(DeviceMath, OnlineSoftmaxMergesPiecesToTheRowsLogSumExp) {
  const auto x = random_floats(1000, 4, -30.f, 30.f);
  std::vector<float> logp(x.size());
  cpu::log_softmax_rows(x.data(), 1, int64_t(x.size()), logp.data());
  const float want = x[0] - logp[0];
  for (size_t pieces : {1u, 2u, 7u, 32u, 1000u}) {
    std::vector<SoftmaxState> part(pieces);
    for (size_t i = 0; i < x.size(); ++i) part[i % pieces] = softmax_add(part[i % pieces], x[i]);
    SoftmaxState all;  // merged back to front, another order than the pieces were filled
    for (size_t p = pieces; p-- > 0;) all = softmax_merge(all, part[p]);
    EXPECT_NEAR(softmax_log_sum(all), want, 1e-5f * std::fabs(want)) << pieces << " pieces";
  }
  EXPECT_EQ(softmax_merge(SoftmaxState{}, SoftmaxState{}).sum, 0.f);  // empty with empty
}

// Masked (-inf) entries add nothing, so a piece holding only them stays empty; a NaN anywhere
// reaches the merged state, whichever piece saw it and in whichever position.
TEST(DeviceMath, OnlineSoftmaxSkipsMaskedEntriesAndKeepsNaN) {
  std::vector<float> x = random_floats(64, 7, -3.f, 3.f);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -INFINITY;
  std::vector<float> logp(x.size());
  cpu::log_softmax_rows(x.data(), 1, int64_t(x.size()), logp.data());
  const float want = x[1] - logp[1];
  std::vector<SoftmaxState> part(2);  // piece 0 holds only -inf
  for (size_t i = 0; i < x.size(); ++i) part[i % 2] = softmax_add(part[i % 2], x[i]);
  EXPECT_EQ(part[0].max, -INFINITY);
  EXPECT_EQ(part[0].sum, 0.f);
  EXPECT_NEAR(softmax_log_sum(softmax_merge(part[0], part[1])), want, 1e-5f * std::fabs(want));
  for (size_t at : {0u, 1u, 33u}) {
    std::vector<SoftmaxState> p(4);
    std::vector<float> y = random_floats(64, 8, -3.f, 3.f);
    y[at] = NAN;
    for (size_t i = 0; i < y.size(); ++i) p[i / 16] = softmax_add(p[i / 16], y[i]);
    SoftmaxState all;
    for (const SoftmaxState& s : p) all = softmax_merge(all, s);
    EXPECT_TRUE(std::isnan(all.sum)) << "NaN at " << at;
    SoftmaxState lone;  // a piece whose only element is the NaN
    lone = softmax_add(lone, NAN);
    EXPECT_TRUE(std::isnan(softmax_merge(p[3], lone).sum));
    EXPECT_TRUE(std::isnan(softmax_merge(lone, p[3]).sum));
  }
}

// The per-element formulas of the cross-entropy kernels against cpu::cross_entropy_*.
TEST(DeviceMath, CrossEntropyFormulasMatchTheCpuKernels) {
  const int64_t n = 5, c = 37;
  const auto x = random_floats(size_t(n * c), 9, -20.f, 20.f);
  const std::vector<int64_t> t = {0, 36, 7, 7, 20};
  std::vector<float> stats(size_t(2 * n)), dx(size_t(n * c));
  const double want = cpu::cross_entropy_forward(x.data(), t.data(), n, c, stats.data());
  double got = 0;
  for (int64_t r = 0; r < n; ++r)
    got += cross_entropy_row_loss(stats[2 * r], stats[2 * r + 1], x[size_t(r * c + t[r])]);
  EXPECT_EQ(got, want);  // the same double terms added in the same order
  const float scale = 0.37f;
  cpu::cross_entropy_backward(x.data(), t.data(), stats.data(), n, c, scale, dx.data());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < c; ++i) {
      const float g = cross_entropy_grad(x[size_t(r * c + i)], stats[2 * r], stats[2 * r + 1],
                                         i == t[r], scale);
      ASSERT_NEAR(g, dx[size_t(r * c + i)], 2e-6f * std::fabs(dx[size_t(r * c + i)]) + 1e-9f)
          << "row " << r << ", class " << i;
    }
}

// Layer norm's per-element output and input gradient, from the CPU's own mean and rstd, with
// and without weight and bias.
TEST(DeviceMath, LayerNormFormulasMatchTheCpuKernels) {
  const int64_t rows = 3, d = 97;
  const auto x = random_floats(size_t(rows * d), 10, -3.f, 3.f);
  const auto w = random_floats(size_t(d), 11, 0.5f, 1.5f), b = random_floats(size_t(d), 12, -1, 1);
  const auto dy = random_floats(size_t(rows * d), 13, -1.f, 1.f);
  std::vector<float> y(x.size()), dx(x.size()), mean(rows), rstd(rows);
  for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
    const float* bp = wp ? b.data() : nullptr;
    cpu::layer_norm_forward(x.data(), wp, bp, rows, d, 1e-5f, y.data(), mean.data(), rstd.data());
    cpu::layer_norm_backward(dy.data(), x.data(), wp, mean.data(), rstd.data(), rows, d,
                             {dx.data(), nullptr, nullptr});
    for (int64_t r = 0; r < rows; ++r) {
      double m1 = 0, m2 = 0;
      for (int64_t i = 0; i < d; ++i) {
        const size_t k = size_t(r * d + i);
        const float gw = wp ? dy[k] * wp[i] : dy[k];
        m1 += gw;
        m2 += gw * (x[k] - mean[r]) * rstd[r];
      }
      for (int64_t i = 0; i < d; ++i) {
        const size_t k = size_t(r * d + i);
        ASSERT_NEAR(layer_norm_output(x[k], mean[r], rstd[r], wp, bp, i), y[k], 1e-6f)
            << "weight " << (wp != nullptr) << ", row " << r << ", column " << i;
        const float gw = wp ? dy[k] * wp[i] : dy[k];
        ASSERT_NEAR(layer_norm_dx(gw, x[k], mean[r], rstd[r], float(m1 / d), float(m2 / d)), dx[k],
                    1e-5f)
            << "weight " << (wp != nullptr) << ", row " << r << ", column " << i;
      }
    }
  }
}

// Welford pieces merged: layer norm's mean and rstd as kernels/cpu computes them, even for a
// row with a large mean and a small spread (where sum-of-squares cancels).
TEST(DeviceMath, MeanVarMergesPiecesToTheCpuLayerNormStatistics) {
  auto x = random_floats(768, 5, -1.f, 1.f);
  for (float& v : x) v += 1000.f;
  std::vector<float> y(x.size());
  float mean = 0, rstd = 0;
  cpu::layer_norm_forward(x.data(), nullptr, nullptr, 1, int64_t(x.size()), 1e-5f, y.data(), &mean,
                          &rstd);
  for (size_t pieces : {1u, 3u, 32u, 768u}) {
    std::vector<MeanVar> part(pieces);
    for (size_t i = 0; i < x.size(); ++i) part[i % pieces] = meanvar_add(part[i % pieces], x[i]);
    MeanVar all;
    for (const MeanVar& p : part) all = meanvar_merge(all, p);
    EXPECT_NEAR(all.mean, mean, 1e-3f) << pieces << " pieces";
    EXPECT_NEAR(meanvar_rstd(all, 1e-5f), rstd, 2e-3f * rstd) << pieces << " pieces";
  }
}

// One AdamW element step against torch's formula in double (the scalars as optim/adamw.cc
// computes them).
TEST(DeviceMath, AdamwElementFollowsTorchsUpdate) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  double p = 0.5, m = 0, v = 0;
  float pf = 0.5f, mf = 0, vf = 0;
  const auto grads = random_floats(20, 6, -1.f, 1.f);
  for (int t = 1; t <= 20; ++t) {
    const double g = grads[t - 1];
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double mhat = m / (1 - std::pow(b1, t)), vhat = v / (1 - std::pow(b2, t));
    p -= lr * mhat / (std::sqrt(vhat) + eps);
    const AdamScalars s{float(1 - lr * wd),
                        float(1 - b1),
                        float(b2),
                        float(1 - b2),
                        float(std::sqrt(1 - std::pow(b2, t))),
                        float(eps),
                        float(-lr / (1 - std::pow(b1, t)))};
    adamw_element(pf, grads[t - 1], mf, vf, s);
    ASSERT_NEAR(pf, p, 1e-6) << "step " << t;
  }
}

// The unary backward formulas and pow against kernels/cpu (to float rounding: the CPU's
// vectorised clones may fuse a multiply and an add).
TEST(DeviceMath, UnaryGradientsAndPowMatchTheCpuKernels) {
  const auto y = random_floats(1001, 9, 0.05f, 0.95f), g = random_floats(1001, 10, -2.f, 2.f);
  std::vector<float> want(y.size());
  const int64_t n = int64_t(y.size());
  const std::pair<UnaryGrad, void (*)(const float*, const float*, float*, int64_t)> grads[] = {
      {UnaryGrad::kTanh, cpu::tanh_backward},
      {UnaryGrad::kSigmoid, cpu::sigmoid_backward},
      {UnaryGrad::kSqrt, cpu::sqrt_backward}};
  for (const auto& [op, cpu_grad] : grads) {
    cpu_grad(y.data(), g.data(), want.data(), n);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(unary_grad(op, y[i], g[i]), want[i], 1e-6f * std::fabs(want[i]) + 1e-7f)
          << "op " << int(op) << " at " << y[i];
  }
  for (float p : {2.f, 0.5f, 3.f, -1.5f}) {
    cpu::pow_scalar(y.data(), p, want.data(), n);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(pow_value(y[i], p), want[i], 1e-6f * std::fabs(want[i])) << "p " << p;
    cpu::pow_scalar_backward(y.data(), p, g.data(), want.data(), n);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(pow_grad(y[i], p, g[i]), want[i], 1e-5f * std::fabs(want[i])) << "p " << p;
  }
}

}  // namespace
}  // namespace cohort::cuda::math
