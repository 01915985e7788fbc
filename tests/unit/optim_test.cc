// Optimizers against hand-written reference updates, state export/import, schedules, clipping.
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/core/thread_pool.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/clip.h"
#include "cohort/optim/schedule.h"
#include "cohort/optim/sgd.h"

namespace cohort::optim {
namespace {

using Vec = std::vector<double>;

Tensor param(const std::vector<float>& v) {
  return from_vector(v, {int64_t(v.size())}).set_requires_grad(true);
}
void set_grad(Tensor& p, const Vec& g) {
  std::vector<float> f(g.begin(), g.end());
  p.set_grad(from_vector(f, p.shape()));
}
void expect_close(const Tensor& t, const Vec& want, double tol = 1e-6) {
  std::vector<float> got = t.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}
template <typename Fn>
void expect_invalid(Fn fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Three steps' gradients for a 3-element parameter.
const std::vector<Vec> kGrads = {{0.5, -1.0, 2.0}, {0.1, 0.3, -0.7}, {-0.4, 0.9, 0.2}};
const std::vector<float> kInit = {1.0f, -2.0f, 0.5f};

// torch.optim.SGD, written out:
//   d = g + wd * p; buf = (t == 1) ? d : momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : (momentum ? buf : d);  p -= lr * d
Vec sgd_reference(SgdOptions o) {
  Vec p(kInit.begin(), kInit.end()), buf(3);
  for (size_t t = 0; t < kGrads.size(); ++t) {
    for (size_t i = 0; i < 3; ++i) {
      double d = kGrads[t][i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = t == 0 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * d;
    }
  }
  return p;
}

Tensor run_sgd(SgdOptions o) {
  Tensor p = param(kInit);
  SGD opt({p}, o);
  for (const Vec& g : kGrads) {
    set_grad(p, g);
    opt.step();
  }
  return p;
}

TEST(SGD, MatchesReferenceInEveryMode) {
  std::vector<SgdOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3},
      {.lr = 0.05, .momentum = 0.9, .nesterov = true},
      {.lr = 0.05, .momentum = 0.8, .nesterov = true, .weight_decay = 0.1},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    expect_close(run_sgd(cases[c]), sgd_reference(cases[c]));
  }
  // Nesterov really differs from classic momentum.
  EXPECT_NE(run_sgd({.lr = 0.05, .momentum = 0.9}).to_vector<float>(),
            run_sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true}).to_vector<float>());
}

TEST(SGD, RejectsInvalidOptions) {
  Tensor p = param(kInit);
  expect_invalid([&] { SGD({p}, {.lr = 0.1, .nesterov = true}); }, "nesterov needs momentum > 0");
  expect_invalid([&] { SGD({p}, {.lr = -1}); }, "invalid learning rate -1");
  expect_invalid([&] { SGD({p, p}, {.lr = 0.1}); }, "same tensor");
  SGD opt({p}, {.lr = 0.1});
  opt.set_lr(0.25);
  EXPECT_EQ(opt.lr(), 0.25);
}

// torch.optim.AdamW, written out (t counts from 1):
//   p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
Vec adamw_reference(AdamWOptions o) {
  auto [b1, b2] = o.betas;
  Vec p(kInit.begin(), kInit.end()), m(3), v(3);
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    for (size_t i = 0; i < 3; ++i) {
      double g = kGrads[t - 1][i];
      p[i] *= 1 - o.lr * o.weight_decay;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + o.eps;
      p[i] -= o.lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  return p;
}

TEST(AdamW, MatchesReferenceWithDecoupledDecay) {
  std::vector<AdamWOptions> cases = {
      {.lr = 0.01, .weight_decay = 0.0},
      {},  // torch defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01
      {.lr = 0.1, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.5},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    Tensor p = param(kInit);
    AdamW opt({{"w", p}}, cases[c]);
    for (const Vec& g : kGrads) {
      set_grad(p, g);
      opt.step();
    }
    expect_close(p, adamw_reference(cases[c]), 2e-6);
    EXPECT_EQ(opt.step_count(0), 3);
  }
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Tensor a = param(kInit), b = param(kInit);
  AdamW opt({{"a", a}, {"b", b}}, {.lr = 0.1});
  set_grad(a, kGrads[0]);
  opt.step();
  EXPECT_EQ(b.to_vector<float>(), kInit);
  EXPECT_EQ(opt.step_count(0), 1);
  EXPECT_EQ(opt.step_count(1), 0);
  OptimizerState s = opt.export_state();
  EXPECT_EQ(s.tensors.count("a.exp_avg"), 1u);
  EXPECT_EQ(s.tensors.count("b.exp_avg"), 0u);
  opt.zero_grad(ZeroGrad::kFillZero);
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(3, 0.0f));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

// Export after two steps, import into a fresh optimizer over a copy of the parameters: the
// next steps must be bit-identical to the uninterrupted run.
template <typename Opt, typename Options>
void check_resume(Options o, const std::vector<std::string>& keys) {
  Tensor p = param(kInit);
  Opt opt({{"layer.weight", p}}, o);
  for (int t = 0; t < 2; ++t) {
    set_grad(p, kGrads[size_t(t)]);
    opt.step();
  }
  OptimizerState s = opt.export_state();
  for (auto& k : keys) EXPECT_EQ(s.tensors.count(k), 1u) << k;
  EXPECT_EQ(s.scalars.at("layer.weight.step"), 2.0);
  Tensor q = p.detach().clone_raw().set_requires_grad(true);
  Opt resumed({{"layer.weight", q}}, o);
  resumed.set_lr(123.0);
  resumed.import_state(s);
  EXPECT_EQ(resumed.lr(), opt.lr());  // lr travels with the state
  set_grad(p, kGrads[2]);
  set_grad(q, kGrads[2]);
  opt.step();
  resumed.step();
  EXPECT_EQ(p.to_vector<float>(), q.to_vector<float>());
}

TEST(Optimizer, ExportImportResumesExactly) {
  check_resume<SGD>(SgdOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true},
                    {"layer.weight.momentum_buffer"});
  check_resume<AdamW>(AdamWOptions{.lr = 0.05},
                      {"layer.weight.exp_avg", "layer.weight.exp_avg_sq"});
}

TEST(Optimizer, ImportRejectsMismatchedState) {
  Tensor p = param(kInit);
  SGD sgd({{"w", p}}, {.lr = 0.1, .momentum = 0.9});
  AdamW adam({{"w", p}}, {});
  set_grad(p, kGrads[0]);
  sgd.step();
  OptimizerState s = sgd.export_state();
  expect_invalid([&] { adam.import_state(s); }, "unexpected key 'w.momentum_buffer'");
  OptimizerState bad = s;
  bad.tensors["w.momentum_buffer"] = zeros({4});
  expect_invalid([&] { sgd.import_state(bad); }, "key 'w.momentum_buffer' has shape [4]");
  bad = s;
  bad.tensors.erase("w.momentum_buffer");
  expect_invalid([&] { sgd.import_state(bad); }, "missing key 'w.momentum_buffer'");
  bad = s;
  bad.scalars["v.step"] = 1;
  expect_invalid([&] { sgd.import_state(bad); }, "unexpected scalar 'v.step'");
  bad = s;
  bad.tensors["other.momentum_buffer"] = zeros({3});
  expect_invalid([&] { sgd.import_state(bad); }, "unexpected key 'other.momentum_buffer'");
  OptimizerState adam_state;
  adam_state.tensors["w.exp_avg"] = zeros({3});
  adam_state.tensors["w.exp_avg_sq"] = zeros({3});
  expect_invalid([&] { adam.import_state(adam_state); }, "missing key 'w.step'");
}

TEST(Optimizer, UpdateDoesNotDependOnThreadCount) {
  auto run = [](int threads) {
    set_num_threads(threads);
    Tensor p = randn({100000}, 1).set_requires_grad(true);
    AdamW opt({p}, {.lr = 0.01});
    p.set_grad(randn({100000}, 2));
    opt.step();
    return p.to_vector<float>();
  };
  EXPECT_EQ(run(1), run(2));
  set_num_threads(0);
}

TEST(Schedule, Values) {
  ConstantLr c(0.3);
  EXPECT_EQ(c.lr_at(0), 0.3);
  EXPECT_EQ(c.lr_at(1000), 0.3);
  StepLr s({.lr = 1.0, .step_size = 10, .gamma = 0.5});
  EXPECT_EQ(s.lr_at(0), 1.0);
  EXPECT_EQ(s.lr_at(9), 1.0);
  EXPECT_EQ(s.lr_at(10), 0.5);
  EXPECT_EQ(s.lr_at(25), 0.25);
  WarmupCosineLr w({.lr = 1.0, .warmup_steps = 4, .total_steps = 14, .min_lr = 0.1});
  EXPECT_DOUBLE_EQ(w.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(w.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(w.lr_at(4), 1.0);              // cosine starts at the peak
  EXPECT_DOUBLE_EQ(w.lr_at(9), 0.1 + 0.9 * 0.5);  // half way: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(w.lr_at(14), 0.1);
  EXPECT_DOUBLE_EQ(w.lr_at(100), 0.1);
  EXPECT_GT(w.lr_at(6), w.lr_at(7));
  Tensor p = param(kInit);
  SGD opt({p}, {.lr = 0.0});
  w.apply(opt, 9);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.55);
  EXPECT_THROW(WarmupCosineLr({.lr = 1.0, .warmup_steps = 5, .total_steps = 3}), InvalidArgument);
  EXPECT_THROW(StepLr({.step_size = 0}), InvalidArgument);
}

TEST(Clip, GlobalNormScalesAllGradients) {
  Tensor a = param({0, 0, 0}), b = param({0, 0}), none = param({1});
  set_grad(a, {3, 0, 0});
  b.set_grad(from_vector({0, 4}, {2}));
  // Global norm over both: sqrt(9 + 16) = 5; clip to 1 scales by 1 / (5 + 1e-6).
  double n = clip_grad_norm({a, b, none}, 1.0);
  EXPECT_DOUBLE_EQ(n, 5.0);
  double c = 1.0 / (5.0 + 1e-6);
  expect_close(a.grad(), {3 * c, 0, 0});
  expect_close(b.grad(), {0, 4 * c});
  EXPECT_FALSE(none.grad().defined());
  // Below the limit: untouched.
  set_grad(a, {0.3, 0, 0});
  EXPECT_NEAR(clip_grad_norm(NamedParams{{"a", a}}, 1.0), 0.3, 1e-7);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0.3f, 0, 0}));
  EXPECT_THROW(clip_grad_norm({a}, -1.0), InvalidArgument);
}

}  // namespace
}  // namespace cohort::optim
