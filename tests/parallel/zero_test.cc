// The zero strategy's behaviour beyond plain equivalence (zero_equivalence_test.cc): gradient
// accumulation, SGD with momentum, stage 3 keeping only its shard between uses, and the errors a
// bad setting gets.
#include <gtest/gtest.h>

#include "cohort/core/config.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/adamw.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/zero/zero_strategy.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

const std::vector<int64_t> kSizes = {9, 17, 13, 5};

std::pair<Tensor, Tensor> batch(int step, int64_t rows) {
  return make_batch(rows, 9, 5, 700 + uint64_t(step));
}

// Every rank's parameters after `steps` steps of k micro-batches of 2 rows each per rank.
std::vector<float> train(int world, int micro, ZeroOptions o, bool sgd) {
  std::vector<float> out;
  ConfigRegistry registry;
  Config cfg(registry);
  run_world(world, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 9});
    std::unique_ptr<optim::Optimizer> opt;
    if (sgd) {
      opt = std::make_unique<optim::SGD>(model.named_parameters(),
                                         optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
    } else {
      opt = std::make_unique<optim::AdamW>(model.named_parameters(), optim::AdamWOptions{});
    }
    ZeroStrategy zero({model, *opt, pg, cfg}, o);
    for (int s = 0; s < 6; ++s) {
      auto all = batch(s, int64_t(world) * micro * 2);
      zero.zero_grad();
      for (int m = 0; m < micro; ++m) {
        int64_t lo = (int64_t(m) * world + r) * 2;
        auto [x, y] = rows_of(all, lo, lo + 2);
        zero.backward(ops::mul_scalar(nn::cross_entropy(zero.forward(x), y), 1.0 / micro),
                      /*sync=*/m == micro - 1);
      }
      zero.step();
    }
    zero.engine().gather_all();
    if (r == 0) out = flat_params(model);
  });
  return out;
}

// Two micro-batches of 2 rows per rank and step equal one of 4 rows (and one process).
TEST(ZeroAccumulation, MicroBatchesEqualTheWholeBatchAtEveryStage) {
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE(stage);
    ZeroOptions o{.stage = stage, .unit_mb = 0.0005};
    std::vector<float> whole = train(1, 4, {.stage = stage}, false);
    EXPECT_LE(max_relative(train(2, 2, o, false), whole), 1e-4);
    EXPECT_LE(max_relative(train(2, 2, o, true), train(1, 4, {.stage = stage}, true)), 1e-5);
  }
}

TEST(ZeroStageThree, KeepsOnlyItsShardBetweenUses) {
  ConfigRegistry registry;
  Config cfg(registry);
  run_world(2, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 9});
    optim::AdamW opt(model.named_parameters(), {});
    ZeroStrategy zero({model, opt, pg, cfg}, {.stage = 3, .unit_mb = 0.0005});
    ASSERT_GT(zero.engine().units().size(), 1u);
    auto [x, y] = batch(0, 4);
    zero.backward(nn::cross_entropy(zero.forward(x), y), true);
    zero.step();
    // A parameter read outside its module is an error, not a read of freed memory.
    EXPECT_THROW(model.named_parameters()[0].second.to_vector<float>(), InvalidArgument);
    for (const auto& u : zero.engine().units()) {
      EXPECT_TRUE(u.flat.impl().storage->released()) << u.plan.name;
      EXPECT_TRUE(u.flat_grad.impl().storage->released()) << u.plan.name;
      EXPECT_EQ(u.shard.numel(), u.layout.shard_size());
    }
  });
}

TEST(ZeroErrors, BadSettingsAndUnsupportedUseNameWhatIsWrong) {
  ConfigRegistry registry;
  Config cfg(registry);
  nn::MLP model(kSizes, {.seed = 9});
  optim::AdamW opt(model.named_parameters(), {});
  EXPECT_THROW(
      {
        try {
          ZeroStrategy z({model, opt, nullptr, cfg}, {.stage = 4});
        } catch (const InvalidArgument& e) {
          EXPECT_NE(std::string(e.what()).find("zero.stage = 4"), std::string::npos);
          throw;
        }
      },
      InvalidArgument);
  // Tied weights across two units: stage 3 would read one while it is freed.
  struct Scale : nn::Module {
    Tensor w;
    explicit Scale(Tensor t) { w = register_parameter("w", t); }
    Tensor forward(const Tensor& x) override { return ops::mul(x, w); }
    std::string type_name() const override { return "Scale"; }
  };
  struct Tied : nn::Module {
    Tied() {
      Tensor t = ones({4});
      register_module("a", std::make_shared<Scale>(t));
      register_module("b", std::make_shared<Scale>(t));
    }
    std::string type_name() const override { return "Tied"; }
  };
  Tied tied;
  optim::AdamW tied_opt(optim::NamedParams{tied.named_parameters()[0]}, {});
  try {
    ZeroStrategy z({tied, tied_opt, nullptr, cfg}, {.stage = 3, .unit_mb = 1e-6});
    ADD_FAILURE() << "no error for a parameter shared across units";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'b.w' is shared"), std::string::npos) << e.what();
  }
  // An optimizer that cannot make a copy of itself for the shards.
  struct Plain : optim::Optimizer {
    explicit Plain(const optim::NamedParams& p) : Optimizer(p, 0.1, {}) {}
    void step() override {}
    std::string type_name() const override { return "Plain"; }
  };
  Plain plain(model.named_parameters());
  try {
    ZeroStrategy z({model, plain, nullptr, cfg}, {.stage = 1});
    ADD_FAILURE() << "no error for an optimizer without make_like";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer Plain cannot be sharded"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cohort::parallel
