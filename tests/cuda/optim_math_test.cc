// The per-element arithmetic of the fused optimizer kernels (kernels/cuda/optim.cu) and the
// matmul's GELU epilogue (device_math.h), on the CPU against cohort's own optimizers: the same
// float32 operations in the same order, so only contraction into FMA may differ.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cohort/kernels/cuda/device_math.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"

namespace cohort::cuda::math {
namespace {

constexpr int64_t kN = 1003;
constexpr int kSteps = 10;

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Within a few float32 roundings: an FMA the compiler forms in one build and not the other
// changes the last bit or two, and ten steps compound it.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-6f * (1.f + std::fabs(want[i]))) << what << ", element " << i;
}

// Runs `opt` for kSteps with fixed random gradients on `p` (a tensor holding `init`), calling
// `element_step(t, grad)` alongside to advance the device_math copy.
template <typename StepFn>
std::vector<float> run_cpu_optimizer(optim::Optimizer& opt, Tensor& p, StepFn element_step) {
  for (int t = 0; t < kSteps; ++t) {
    const auto g = uniform(kN, 100 + t, -1.f, 1.f);
    p.set_grad(from_vector(g, p.shape()));
    opt.step();
    element_step(t, g);
  }
  return p.to_vector<float>();
}

TEST(OptimMath, SgdElementMatchesCohortsSgdInEveryMode) {
  const std::vector<optim::SgdOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.05, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const optim::SgdOptions& o = cases[c];
    const auto init = uniform(kN, 7, -2.f, 2.f);
    Tensor p = from_vector(init, {kN}).set_requires_grad(true);
    optim::SGD opt(std::vector<Tensor>{p}, o);
    std::vector<float> mine = init, buf(kN, 0.f);
    const SgdScalars s = sgd_scalars(o.lr, o.momentum, o.dampening, o.weight_decay);
    const auto got = run_cpu_optimizer(opt, p, [&](int t, const std::vector<float>& g) {
      const SgdStep step = o.momentum == 0 ? SgdStep::kPlain
                           : t == 0        ? SgdStep::kFirst
                                           : SgdStep::kMomentum;
      for (int64_t i = 0; i < kN; ++i) sgd_element(mine[i], g[i], buf[i], s, step, o.nesterov);
    });
    expect_close(mine, got, ("SGD case " + std::to_string(c)).c_str());
  }
}

TEST(OptimMath, AdamwScalarsAndElementMatchCohortsAdamW) {
  const optim::AdamWOptions o{.lr = 1e-2, .betas = {0.9, 0.999}, .eps = 1e-8, .weight_decay = 0.1};
  const auto init = uniform(kN, 8, -2.f, 2.f);
  Tensor p = from_vector(init, {kN}).set_requires_grad(true);
  optim::AdamW opt(std::vector<Tensor>{p}, o);
  std::vector<float> mine = init, m(kN, 0.f), v(kN, 0.f);
  const auto got = run_cpu_optimizer(opt, p, [&](int t, const std::vector<float>& g) {
    const AdamScalars s =
        adamw_scalars(o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, t + 1);
    for (int64_t i = 0; i < kN; ++i) adamw_element(mine[i], g[i], m[i], v[i], s);
  });
  expect_close(mine, got, "AdamW");
}

// cuBLASLt's GELU epilogue is the tanh approximation; the GPU test compares with gelu_tanh, so
// pin gelu_tanh to the formula in double, and record how far it is from cohort's exact GELU.
TEST(OptimMath, GeluTanhIsTheTanhFormulaAndWithin5e4OfExactGelu) {
  float max_diff = 0.f;
  for (float x : uniform(20001, 9, -8.f, 8.f)) {
    const double xd = x;
    const double want =
        0.5 * xd * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
    ASSERT_NEAR(gelu_tanh(x), want, 1e-6 * std::fabs(want) + 1e-7) << x;
    max_diff = std::max(max_diff, std::fabs(gelu_tanh(x) - gelu(x)));
  }
  EXPECT_LT(max_diff, 5e-4f);  // the documented 4.7e-4 at x = -2.7 (matmul.h)
  EXPECT_GT(max_diff, 1e-4f);  // and it is a real one: exact-GELU models see it
}

}  // namespace
}  // namespace cohort::cuda::math
