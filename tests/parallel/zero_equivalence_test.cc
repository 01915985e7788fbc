// ZeRO stages 1-3 train like one process on the combined batch: N ranks (threads, real
// communicators) against a single model, AdamW with clipping by the global norm, for the GPT
// example's architecture, the CNN and an MLP; uneven shards (3 and 4 ranks), many units and one.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "cohort/core/config.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/cnn.h"
#include "cohort/nn/models/gpt.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/clip.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/ddp.h"
#include "cohort/parallel/zero/zero_strategy.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

constexpr int kSteps = 20;
constexpr int64_t kPerRank = 2;
constexpr double kClip = 1.0;
const optim::AdamWOptions kAdamW{.lr = 3e-3, .betas = {0.9, 0.99}, .weight_decay = 0.01};

struct Model {
  std::string name;
  std::function<std::unique_ptr<nn::Module>()> make;
  // Rows [lo, hi) of step s's combined batch (every rank draws the same batch and takes its part).
  std::function<std::pair<Tensor, Tensor>(int step, int64_t rows)> batch;
};

std::pair<Tensor, Tensor> token_batch(int step, int64_t rows, int64_t T) {
  std::vector<int64_t> idx(size_t(rows * (T + 1)));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t((i * 131 + size_t(step) * 17) % 256);
  Tensor all = from_vector_i64(idx, {rows, T + 1});
  return {all.slice(1, 0, T).contiguous_raw(), all.slice(1, 1, T + 1).contiguous_raw()};
}

Model gpt_model() {
  constexpr int64_t T = 16;
  return {"gpt",
          [] {
            return std::make_unique<nn::GPT>(nn::GptOptions{
                .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = T, .seed = 5});
          },
          [](int step, int64_t rows) { return token_batch(step, rows, T); }};
}

Model cnn_model() {
  return {"cnn", [] { return std::make_unique<nn::CNN>(nn::CnnOptions{.seed = 5}); },
          [](int step, int64_t rows) { return make_batch(rows, 784, 10, 300 + uint64_t(step)); }};
}

Model mlp_model() {
  return {"mlp",
          [] {
            return std::make_unique<nn::MLP>(std::vector<int64_t>{9, 17, 13, 5},
                                             nn::MlpOptions{.seed = 5});
          },
          [](int step, int64_t rows) { return make_batch(rows, 9, 5, 500 + uint64_t(step)); }};
}

Tensor loss_of(nn::Module& m, const Model& spec, const Tensor& logits, const Tensor& y) {
  if (spec.name == "gpt")
    return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  return nn::cross_entropy(logits, y);
}

struct Trajectory {
  std::vector<double> losses;  // the combined batch's loss, per step
  std::vector<float> params;   // after the last step (rank 0's; every rank's must agree)
  bool ranks_agree = true;
};

Trajectory reference(const Model& spec, int world) {
  auto model = spec.make();
  optim::AdamW opt(model->named_parameters(), kAdamW);
  Trajectory run;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = spec.batch(s, world * kPerRank);
    Tensor loss = loss_of(*model, spec, (*model)(x), y);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm(opt.params(), kClip);
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  run.params = flat_params(*model);
  return run;
}

// DDP on the same ranks and batches: its parameters are what ZeRO's must equal (both average
// the same gradients; only the one process's summation order differs from both).
std::vector<float> train_ddp(const Model& spec, int world,
                             std::vector<double>* mean_losses = nullptr) {
  std::vector<float> params;
  std::vector<std::vector<double>> losses(static_cast<size_t>(world));
  run_world(world, [&](int r, PG pg) {
    auto model = spec.make();
    optim::AdamW opt(model->named_parameters(), kAdamW);
    DDP ddp(*model, pg);
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = rows_of(spec.batch(s, world * kPerRank), r * kPerRank, (r + 1) * kPerRank);
      opt.zero_grad();
      Tensor loss = loss_of(*model, spec, ddp(x), y);
      loss.backward();
      losses[size_t(r)].push_back(loss.item<float>());
      optim::clip_grad_norm(opt.params(), kClip);
      opt.step();
    }
    if (r == 0) params = flat_params(*model);
  });
  if (mean_losses) {
    mean_losses->clear();
    for (int s = 0; s < kSteps; ++s) {
      double sum = 0;
      for (int r = 0; r < world; ++r) sum += losses[size_t(r)][size_t(s)];
      mean_losses->push_back(sum / world);
    }
  }
  return params;
}

Trajectory train_zero(const Model& spec, int world, ZeroOptions o) {
  std::vector<std::vector<double>> losses(static_cast<size_t>(world));
  std::vector<std::vector<float>> params(static_cast<size_t>(world));
  ConfigRegistry registry;
  Config cfg(registry);
  run_world(world, [&](int r, PG pg) {
    auto model = spec.make();
    optim::AdamW opt(model->named_parameters(), kAdamW);
    ZeroStrategy zero({*model, opt, pg, cfg}, o);
    for (int s = 0; s < kSteps; ++s) {
      auto [x, y] = rows_of(spec.batch(s, world * kPerRank), r * kPerRank, (r + 1) * kPerRank);
      zero.zero_grad();
      Tensor loss = loss_of(*model, spec, zero.forward(x), y);
      zero.backward(loss, /*sync=*/true);
      zero.clip_grad_norm(kClip);
      zero.step();
      losses[size_t(r)].push_back(loss.item<float>());
    }
    zero.engine().gather_all();
    params[size_t(r)] = flat_params(*model);
  });
  Trajectory run;
  for (int s = 0; s < kSteps; ++s) {
    double sum = 0;
    for (int r = 0; r < world; ++r) sum += losses[size_t(r)][size_t(s)];
    run.losses.push_back(sum / world);
  }
  run.params = params[0];
  for (int r = 1; r < world; ++r) run.ranks_agree &= params[size_t(r)] == params[0];
  return run;
}

// Float32 sums in another order differ in the last bits, and training amplifies that: AdamW
// divides by sqrt(v) of near-zero gradients. So ZeRO is held to DDP on the same ranks (both
// average the same gradients: ZeRO's losses stay within 1e-7 of DDP's, measured) and to one
// process on the combined batch within 1e-5 relative, or twice DDP's own distance where DDP is
// further (the GPT at 3 ranks: 1.8e-5 by step 18, measured).
struct Reference {
  Trajectory one_process;
  std::vector<double> ddp_losses;
  std::vector<float> ddp_params;
};

Reference reference_of(const Model& spec, int world) {
  Reference r{reference(spec, world), {}, {}};
  r.ddp_params = train_ddp(spec, world, &r.ddp_losses);
  return r;
}

double relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-30);
}

void expect_equivalent(const Trajectory& got, const Reference& want) {
  const auto& one = want.one_process.losses;
  ASSERT_EQ(got.losses.size(), one.size());
  double ddp_distance = 0;
  for (size_t s = 0; s < one.size(); ++s)
    ddp_distance = std::max(ddp_distance, relative(want.ddp_losses[s], one[s]));
  const double tol = std::max(1e-5, 2 * ddp_distance);
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_LE(relative(got.losses[s], one[s]), tol) << "step " << s << " (one process)";
    EXPECT_LE(relative(got.losses[s], want.ddp_losses[s]), 1e-6) << "step " << s << " (DDP)";
  }
  ASSERT_EQ(got.params.size(), want.ddp_params.size());
  EXPECT_LE(max_relative(got.params, want.ddp_params), 2e-4);
  EXPECT_TRUE(got.ranks_agree) << "ranks hold different parameters";
}

struct Case {
  int stage, world;
};

class ZeroEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroEquivalence, GptCnnAndMlpMatchOneProcessOnTheCombinedBatch) {
  auto [stage, world] = GetParam();
  for (const Model& spec : {gpt_model(), cnn_model(), mlp_model()}) {
    SCOPED_TRACE(spec.name);
    // Small units: many reductions in flight, and parameters split across shard boundaries.
    Trajectory got = train_zero(spec, world, {.stage = stage, .unit_mb = 0.05});
    expect_equivalent(got, reference_of(spec, world));
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, ZeroEquivalence,
                         ::testing::Values(Case{1, 2}, Case{1, 3}, Case{1, 4}, Case{2, 2},
                                           Case{2, 3}, Case{2, 4}, Case{3, 2}, Case{3, 3},
                                           Case{3, 4}),
                         [](const auto& info) {
                           return "Stage" + std::to_string(info.param.stage) + "World" +
                                  std::to_string(info.param.world);
                         });

TEST(Zero, OneUnitForTheWholeModelAndOneProcessMatchToo) {
  Model spec = mlp_model();
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE(stage);
    expect_equivalent(train_zero(spec, 3, {.stage = stage, .unit_mb = 64}), reference_of(spec, 3));
    // One process: the same arithmetic as the plain optimizer, bit for bit.
    Trajectory one = reference(spec, 1);
    Trajectory got = train_zero(spec, 1, {.stage = stage});
    EXPECT_EQ(got.losses, one.losses);
    EXPECT_EQ(got.params, one.params);
  }
}

}  // namespace
}  // namespace cohort::parallel
