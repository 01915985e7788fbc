// train.precision = "bf16": every matrix product rounds both operands to bf16 and accumulates in
// f32, forward and backward, on the CPU (kernels/cpu gemm_bf16) as on a device; parameters and
// gradients stay f32. The GPU's cuBLASLt version is compared with this one in
// tests/cuda/gpu/training_test.cc.
#include <gtest/gtest.h>

#include "cohort/core/dtype.h"
#include "cohort/kernels/cpu/gemm.h"
#include "cohort/ops/ops.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/trainer.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/bf16_rounding.h"
#include "tests/support/stand_in_device.h"

namespace cohort {
namespace {

using ops::MatmulPrecision;

std::vector<float> rounded(std::vector<float> v) {
  return testing::rounded_to_bf16(std::move(v));
}

Tensor rounded(const Tensor& t) {
  return from_vector(rounded(t.contiguous().to_vector<float>()), t.shape());
}

// A fresh leaf with x's values that records its gradient.
Tensor leaf(const Tensor& x) {
  Tensor t = x.clone_raw();
  t.set_requires_grad(true);
  return t;
}

TEST(Bf16Gemm, IsSgemmOnOperandsRoundedToBf16InEveryTransposition) {
  const int64_t m = 5, n = 6, k = 9, ld = 11;  // ld past the stored columns: a view's row stride
  const std::vector<float> a = randn({k * ld}, 1).to_vector<float>();
  const std::vector<float> b = randn({k * ld}, 2).to_vector<float>();
  const std::vector<float> ra = rounded(a), rb = rounded(b);
  for (cpu::Trans ta : {cpu::Trans::kNo, cpu::Trans::kYes})
    for (cpu::Trans tb : {cpu::Trans::kNo, cpu::Trans::kYes}) {
      std::vector<float> got(m * n, 1.f), want(m * n, 1.f), plain(m * n, 1.f);
      cpu::gemm_bf16(m, n, k, 0.5f, {a.data(), ld, ta}, {b.data(), ld, tb}, 2.f, got.data(), n);
      cpu::sgemm(m, n, k, 0.5f, {ra.data(), ld, ta}, {rb.data(), ld, tb}, 2.f, want.data(), n);
      cpu::sgemm(m, n, k, 0.5f, {a.data(), ld, ta}, {b.data(), ld, tb}, 2.f, plain.data(), n);
      EXPECT_EQ(got, want) << "trans a " << int(ta) << ", trans b " << int(tb);
      EXPECT_NE(got, plain) << "the operands were not rounded";
    }
}

// linear: y = round(x) round(W)^T + b; dx = round(g) round(W); dW = round(g)^T round(x); db in
// f32. The precision is the forward's, also when backward runs after the scope has ended.
TEST(Bf16Precision, LinearRoundsTheOperandsOfItsThreeProducts) {
  const Tensor x0 = randn({6, 7}, 3), w0 = randn({4, 7}, 4), b0 = randn({4}, 5),
               g = randn({6, 4}, 6);
  Tensor x = leaf(x0), w = leaf(w0), b = leaf(b0);
  Tensor y;
  {
    ops::MatmulPrecisionScope bf16(MatmulPrecision::kBF16);
    EXPECT_EQ(ops::matmul_precision(), MatmulPrecision::kBF16);
    y = ops::linear(x, w, b);
  }
  EXPECT_EQ(ops::matmul_precision(), MatmulPrecision::kF32) << "the scope restores f32";
  y.backward(g);
  Tensor rx = leaf(rounded(x0)), rw = leaf(rounded(w0)), rb = leaf(b0);
  Tensor want = ops::linear(rx, rw, rb);
  want.backward(rounded(g));
  EXPECT_EQ(y.to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(x.grad().to_vector<float>(), rx.grad().to_vector<float>());
  EXPECT_EQ(w.grad().to_vector<float>(), rw.grad().to_vector<float>());
  Tensor fb = leaf(b0);
  ops::linear(x0, w0, fb).backward(g);
  EXPECT_EQ(b.grad().to_vector<float>(), fb.grad().to_vector<float>()) << "db: g's sums in f32";
  EXPECT_NE(y.to_vector<float>(), ops::linear(x0, w0, b0).to_vector<float>());
}

TEST(Bf16Precision, MatmulAndBatchedMatmulRoundTheirOperands) {
  const Tensor a = randn({3, 5, 8}, 7), b = randn({3, 8, 4}, 8), b2 = randn({8, 4}, 9);
  ops::MatmulPrecisionScope bf16(MatmulPrecision::kBF16);
  const Tensor batched = ops::matmul(a, b), flat = ops::matmul(a, b2);
  ops::MatmulPrecisionScope f32(MatmulPrecision::kF32);
  EXPECT_EQ(batched.to_vector<float>(), ops::matmul(rounded(a), rounded(b)).to_vector<float>());
  EXPECT_EQ(flat.to_vector<float>(), ops::matmul(rounded(a), rounded(b2)).to_vector<float>());
}

std::vector<std::string> job(const std::string& name, const std::string& precision,
                             const std::string& device = "cpu") {
  return {"data.dataset=synthetic",
          "data.synthetic_samples=512",
          "data.batch_size=32",
          "model.hidden=[64]",
          "train.max_steps=30",
          "optim.momentum=0.9",
          "run.threads=1",
          "run.progress=none",
          "ckpt.enabled=false",
          "train.precision=" + precision,
          "run.device=" + device,
          "run.name=" + name,
          "run.dir=" + testing::fresh_dir("cohort_bf16_", name).string()};
}

// `cohort train` in bf16 learns what f32 learns (the synthetic classes are separable), its
// result is not f32's (the products were rounded), and a device run gives the CPU's bits.
TEST(Bf16Precision, CohortTrainInBf16LearnsAsF32DoesAndTheDeviceMatchesTheCpu) {
  const train::TrainSummary f32 =
      train::Trainer(train::load_config("/dev/null", job("f32", "f32"))).run();
  const train::TrainSummary bf16 =
      train::Trainer(train::load_config("/dev/null", job("bf16", "bf16"))).run();
  EXPECT_NE(bf16.eval.loss, f32.eval.loss);
  EXPECT_NEAR(bf16.eval.accuracy, f32.eval.accuracy, 0.02);
  EXPECT_LT(bf16.eval.loss, 1.1 * f32.eval.loss + 0.01);
  EXPECT_EQ(ops::matmul_precision(), MatmulPrecision::kF32) << "the run's precision ends with it";
  testing::StandInGpu gpu;
  const train::TrainSummary on_device =
      train::Trainer(train::load_config("/dev/null", job("bf16_dev", "bf16", "cuda"))).run();
  EXPECT_EQ(on_device.eval.loss, bf16.eval.loss);
}

TEST(Bf16Precision, AnUnknownPrecisionIsAConfigErrorNamingTheKey) {
  try {
    train::load_config("/dev/null", {"train.precision=fp16"});
    FAIL() << "train.precision = fp16 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort
