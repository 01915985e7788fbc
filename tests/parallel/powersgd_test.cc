// PowerSGD (parallel/ddp/powersgd_hook.h, low_rank.h) on ranks as threads: the matrix plan and
// Gram-Schmidt, exact reconstruction of a rank-r average, 1-D tensors and warm-up steps
// averaged exactly, error feedback and warm start kept, ranks in sync, training, the keys.
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/core/config.h"
#include "cohort/nn/loss.h"
#include "cohort/parallel/ddp/ddp_strategy.h"
#include "cohort/parallel/ddp/low_rank.h"
#include "cohort/parallel/ddp/powersgd_hook.h"
#include "cohort/parallel/strategy_registry.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/hook_train_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

TEST(LowRank, PlansMatricesAsPyTorchDoes) {
  EXPECT_EQ(low_rank::plan_matrix({512}, 4, 2.0).rank, 0);  // 1-D: uncompressed
  auto p = low_rank::plan_matrix({16, 3, 5, 5}, 4, 2.0);    // conv weight: [out, in*kh*kw]
  EXPECT_EQ(p.rows, 16);
  EXPECT_EQ(p.cols, 75);
  EXPECT_EQ(p.rank, 4);
  EXPECT_EQ(low_rank::plan_matrix({6, 5}, 4, 2.0).rank, 0);   // 30 < 2 * 11 * 4
  EXPECT_EQ(low_rank::plan_matrix({40, 2}, 4, 0.5).rank, 2);  // rank clamped to min(n, m)
  EXPECT_EQ(low_rank::plan_matrix({40, 2}, 4, 2.0).rank, 0);  // 80 < 2 * 42 * 2
}

TEST(LowRank, OrthogonalizedColumnsAreOrthonormalAndSpanTheSameSpace) {
  const int64_t rows = 9, cols = 3;
  std::vector<float> a(rows * cols), q;
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(std::sin(double(i) * 1.7) + 0.1 * double(i));
  q = a;
  low_rank::orthogonalize_columns(q.data(), rows, cols);
  for (int64_t i = 0; i < cols; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double d = 0;
      for (int64_t k = 0; k < rows; ++k) d += double(q[k * cols + i]) * q[k * cols + j];
      EXPECT_NEAR(d, i == j ? 1.0 : 0.0, 1e-5) << i << "," << j;
    }
  }
  // Column i of a lies in the span of q's columns 0..i: its residual after projection is 0.
  for (int64_t i = 0; i < cols; ++i) {
    std::vector<double> r(rows);
    for (int64_t k = 0; k < rows; ++k) r[k] = a[k * cols + i];
    for (int64_t j = 0; j <= i; ++j) {
      double d = 0;
      for (int64_t k = 0; k < rows; ++k) d += r[k] * q[k * cols + j];
      for (int64_t k = 0; k < rows; ++k) r[k] -= d * q[k * cols + j];
    }
    for (int64_t k = 0; k < rows; ++k) EXPECT_NEAR(r[k], 0.0, 1e-4);
  }
  std::vector<float> z(rows * 2, 0.0f);
  low_rank::orthogonalize_columns(z.data(), rows, 2);
  for (float v : z) EXPECT_EQ(v, 0.0f);  // zero stays zero, no NaN
}

// One bucket: a [rows, cols] matrix then a 1-D tensor of `bias` values, filled per rank by
// `fill(rank, index)`; run through `hook` (one per rank) `steps` times. Returns each rank's
// bucket after the last step.
struct OneBucket {
  int64_t rows = 12, cols = 10, bias = 5;
  size_t numel() const { return size_t(rows * cols + bias); }
  GradBucket view(std::vector<float>& data) const {
    return {.index = 0,
            .num_buckets = 1,
            .data = data.data(),
            .numel = numel(),
            .parameters = {"w", "b"},
            .offsets = {0, size_t(rows * cols)},
            .shapes = {{rows, cols}, {bias}}};
  }
};

std::vector<std::vector<float>> run_bucket(
    const OneBucket& b, const std::vector<std::shared_ptr<PowerSgdHook>>& hooks,
    const std::function<float(int rank, size_t i, int step)>& fill, int steps) {
  std::vector<std::vector<float>> out(kWorld);
  run_world(kWorld, [&](int r, PG pg) {
    std::vector<float> data(b.numel());
    for (int s = 0; s < steps; ++s) {
      for (size_t i = 0; i < data.size(); ++i) data[i] = fill(r, i, s);
      GradBucket view = b.view(data);
      hooks[size_t(r)]->run(*pg, view).wait();
    }
    out[size_t(r)] = data;
  });
  return out;
}

std::vector<std::shared_ptr<PowerSgdHook>> make_hooks(PowerSgdOptions o) {
  return {std::make_shared<PowerSgdHook>(o), std::make_shared<PowerSgdHook>(o)};
}

// Rank r's gradient: w = u v_r^T (rank 1, same u), b arbitrary. The average is u avg(v)^T,
// rank 1: PowerSGD at rank 1 must give it back exactly, on both ranks.
float rank_one(const OneBucket& b, int r, size_t i, int step) {
  if (i >= size_t(b.rows * b.cols)) return float(r * 10 + int(i)) + 0.5f * float(step);
  size_t row = i / size_t(b.cols), col = i % size_t(b.cols);
  float u = 1.0f + 0.25f * float(row);
  float v = float(r + 1) * std::cos(0.3f * float(col) + float(step));
  return u * v;
}

TEST(PowerSgdHook, ReconstructsARankRAverageExactlyAndAveragesOneDTensors) {
  OneBucket b;
  auto fill = [&](int r, size_t i, int s) { return rank_one(b, r, i, s); };
  auto out = run_bucket(b, make_hooks({.rank = 1, .start_step = 0}), fill, 1);
  for (size_t i = 0; i < b.numel(); ++i) {
    float want = 0.5f * (fill(0, i, 0) + fill(1, i, 0));
    EXPECT_NEAR(out[0][i], want, 1e-5f * (1.0f + std::abs(want))) << i;
    EXPECT_EQ(out[0][i], out[1][i]) << i;  // bit-identical on every rank
  }
}

// A step whose gradient is zero on every rank (an unused layer, a zero-initialized one after
// it) zeroes Q; the next step must still factorize, not send zeros for good.
TEST(PowerSgdHook, AZeroGradientStepDoesNotStopTheMatrixTraining) {
  OneBucket b;
  auto fill = [&](int r, size_t i, int s) { return s == 0 ? 0.0f : rank_one(b, r, i, s); };
  auto out =
      run_bucket(b, make_hooks({.rank = 1, .start_step = 0, .error_feedback = false}), fill, 2);
  for (size_t i = 0; i < size_t(b.rows * b.cols); ++i) {
    float want = 0.5f * (fill(0, i, 1) + fill(1, i, 1));
    EXPECT_NEAR(out[0][i], want, 1e-5f * (1.0f + std::abs(want))) << i;
  }
}

// A warm Q that a non-finite step left NaN is redrawn: the next steps factorize again.
TEST(PowerSgdHook, ANonFiniteWarmQIsRedrawn) {
  OneBucket b;
  auto fill = [&](int r, size_t i, int s) { return rank_one(b, r, i, s); };
  auto hooks = make_hooks({.rank = 1, .start_step = 0, .error_feedback = false});
  run_bucket(b, hooks, fill, 1);
  for (auto& h : hooks) {
    StrategyState st = h->state();
    for (auto& [name, t] : st.tensors)
      if (name == "q/w") t = from_vector(std::vector<float>(size_t(b.cols), NAN), {b.cols});
    h->load_state(st);
  }
  auto out = run_bucket(b, hooks, fill, 1);
  for (size_t i = 0; i < size_t(b.rows * b.cols); ++i) {
    float want = 0.5f * (fill(0, i, 0) + fill(1, i, 0));
    EXPECT_NEAR(out[0][i], want, 1e-5f * (1.0f + std::abs(want))) << i;
  }
}

TEST(LowRank, OrthogonalizeReportsAZeroColumn) {
  std::vector<float> a = {1, 0, 2, 0, 3, 0};  // [3, 2], second column zero
  EXPECT_FALSE(low_rank::orthogonalize_columns(a.data(), 3, 2));
  std::vector<float> c = {1, 1, 2, 0, 3, 1};
  EXPECT_TRUE(low_rank::orthogonalize_columns(c.data(), 3, 2));
}

TEST(PowerSgdHook, WarmUpStepsAreThePlainAverage) {
  OneBucket b;
  auto fill = [](int r, size_t i, int s) { return float(r) * 3.0f + std::sin(float(i + s)); };
  auto hooks = make_hooks({.rank = 1, .start_step = 2});
  auto out = run_bucket(b, hooks, fill, 2);
  for (size_t i = 0; i < b.numel(); ++i)
    EXPECT_FLOAT_EQ(out[0][i], 0.5f * (fill(0, i, 1) + fill(1, i, 1))) << i;
  EXPECT_TRUE(hooks[0]->q_of("w").empty());  // no factorization yet
  EXPECT_EQ(hooks[0]->take_interval_metrics()["compress_ratio"].get<double>(), 1.0);
}

TEST(PowerSgdHook, ErrorFeedbackKeepsWhatWasNotSentAndQIsWarmAndShared) {
  OneBucket b;
  auto fill = [](int r, size_t i, int s) { return std::sin(float(i * (r + 2) + s)); };
  auto hooks = make_hooks({.rank = 2, .start_step = 0});
  auto out = run_bucket(b, hooks, fill, 1);
  for (int r = 0; r < kWorld; ++r) {
    auto res = hooks[size_t(r)]->residual_of("w");
    ASSERT_EQ(res.size(), size_t(b.rows * b.cols));
    for (size_t i = 0; i < res.size(); ++i)  // residual = own gradient - what was applied
      EXPECT_NEAR(res[i], fill(r, i, 0) - out[size_t(r)][i], 1e-5f) << r << " " << i;
  }
  EXPECT_TRUE(hooks[0]->residual_of("b").empty());  // 1-D: sent exactly, nothing kept
  auto q0 = hooks[0]->q_of("w");
  EXPECT_EQ(q0.size(), size_t(b.cols * 2));
  EXPECT_EQ(q0, hooks[1]->q_of("w"));
  // The bytes: P [12, 2] and the bias in the first allreduce, Q [10, 2] in the second.
  auto m = hooks[0]->take_interval_metrics();
  EXPECT_EQ(m["compress_message_bytes"].get<double>(), 4.0 * (24 + 5 + 20));
  EXPECT_EQ(m["compress_raw_bytes"].get<double>(), 4.0 * 125);
}

TEST(PowerSgdHook, WithoutErrorFeedbackNothingIsKept) {
  OneBucket b;
  auto fill = [](int r, size_t i, int s) { return std::cos(float(i + r + s)); };
  auto hooks = make_hooks({.rank = 1, .start_step = 0, .error_feedback = false});
  run_bucket(b, hooks, fill, 2);
  EXPECT_TRUE(hooks[0]->residual_of("w").empty());
  EXPECT_FALSE(hooks[0]->state().per_rank);
}

// Training under DDP (bucket rebuild after step 1, several buckets): ranks stay bit-identical
// and the loss falls as with the plain average; state round-trips into a fresh hook.
TEST(PowerSgdHook, TrainsInSyncUnderDdpAndItsStateRoundTrips) {
  std::vector<std::shared_ptr<PowerSgdHook>> hooks(kWorld);
  auto params = train_with_hook(
      [&](int r) {
        hooks[size_t(r)] =
            std::make_shared<PowerSgdHook>(PowerSgdOptions{.rank = 2, .start_step = 2});
        return hooks[size_t(r)];
      },
      12);
  EXPECT_EQ(params[0], params[1]);
  auto plain = train_with_hook(nullptr, 12);
  double dist = 0, norm = 0;
  for (size_t i = 0; i < plain[0].size(); ++i) {
    dist += std::pow(double(params[0][i] - plain[0][i]), 2);
    norm += std::pow(double(plain[0][i]), 2);
  }
  EXPECT_LT(std::sqrt(dist / norm), 0.1);  // close to the uncompressed run, not equal
  EXPECT_GT(std::sqrt(dist), 0.0);

  StrategyState st = hooks[1]->state();
  EXPECT_TRUE(st.per_rank);
  PowerSgdHook fresh({.rank = 2, .start_step = 2});
  fresh.load_state(st);
  for (const char* name : {"layers.0.weight", "layers.2.weight"}) {
    EXPECT_EQ(fresh.q_of(name), hooks[1]->q_of(name)) << name;
    EXPECT_EQ(fresh.residual_of(name), hooks[1]->residual_of(name)) << name;
  }
  PowerSgdHook other_rank({.rank = 3});
  EXPECT_THROW(other_rank.load_state(st), InvalidArgument);
}

TEST(PowerSgdHook, DdpCompressionKeyChoosesItAndBadOptionsAreRefused) {
  ConfigRegistry registry;
  add_strategy_keys(registry);
  Config cfg(registry);
  cfg.set_from_string("ddp.compression", "powersgd", "test");
  cfg.set_from_string("ddp.powersgd_rank", "4", "test");
  cfg.set_from_string("ddp.powersgd_start_step", "3", "test");
  auto hook = compression_hook_from(cfg);
  ASSERT_NE(hook, nullptr);
  EXPECT_EQ(hook->name(), "powersgd");
  EXPECT_EQ(powersgd_options_from(cfg).rank, 4);
  EXPECT_EQ(powersgd_options_from(cfg).start_step, 3);
  try {
    cfg.set_from_string("ddp.powersgd_rank", "0", "test");
    ADD_FAILURE() << "rank 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ddp.powersgd_rank"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PowerSgdHook({.rank = 0}), InvalidArgument);
}

}  // namespace
}  // namespace cohort::parallel
