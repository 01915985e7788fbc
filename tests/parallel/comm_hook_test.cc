// DDP communication hooks (parallel/ddp/comm_hook.h): what a hook is handed, chained collectives,
// registration errors, hook state through the ddp strategy, and a half-precision hook that
// trains Fashion-MNIST as well as the default.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <numeric>

#include "cohort/autograd/node.h"
#include "cohort/core/config.h"
#include "cohort/data/fashion_mnist.h"
#include "cohort/data/loader.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/ddp.h"
#include "cohort/parallel/ddp/ddp_strategy.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/hook_train_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

constexpr int kSteps = 4;

// Averages by sum then division in a continuation (two steps, as compressing hooks run), and
// counts buckets: state that survives a checkpoint. Records what it was handed.
class SumThenDivideHook : public CommHook {
 public:
  std::string name() const override { return "sum_then_divide"; }
  comm::Work run(comm::ProcessGroup& g, const GradBucket& b) override {
    seen.push_back(b);
    ++buckets_done;
    comm::AllreduceOptions o{.output = b.data, .count = b.numel, .timeout = b.timeout};
    return g.allreduce_async(o).then([&g, b] {
      for (size_t i = 0; i < b.numel; ++i) b.data[i] /= float(g.size());
      // A second collective in the chain: every rank checks the first element agrees.
      auto first = std::make_shared<float>(b.numel ? b.data[0] : 0.0f);
      return g.allreduce_async({.output = first.get(), .count = 1, .op = comm::ReduceOp::max})
          .then([first, b] {
            EXPECT_EQ(*first, b.numel ? b.data[0] : 0.0f);
            comm::Work w = comm::Work::pending("check");
            w.complete(nullptr);
            return w;
          });
    });
  }
  StrategyState state() const override {
    StrategyState s;
    s.values["buckets_done"] = buckets_done;
    return s;
  }
  void load_state(const StrategyState& s) override {
    buckets_done = s.values.at("buckets_done").get<int64_t>();
  }
  std::vector<GradBucket> seen;
  int64_t buckets_done = 0;
};

// Every rank's parameters after kSteps steps; `hook` (if any) made per rank.
std::vector<std::vector<float>> train(const std::function<std::shared_ptr<CommHook>()>& hook,
                                      std::vector<std::shared_ptr<CommHook>>* hooks = nullptr) {
  if (hooks) hooks->assign(kWorld, nullptr);
  return train_with_hook(
      [&](int r) -> std::shared_ptr<CommHook> {
        if (!hook) return nullptr;
        auto h = hook();
        if (hooks) (*hooks)[size_t(r)] = h;
        return h;
      },
      kSteps);
}

TEST(CommHook, ATwoStageHookTrainsBitIdenticallyToTheDefault) {
  auto want = train(nullptr);
  std::vector<std::shared_ptr<CommHook>> hooks;
  auto got = train([] { return std::make_shared<SumThenDivideHook>(); }, &hooks);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], got[0]);
  // Buckets come in index order with the parameters laid out as the bucket's slots.
  auto& h = static_cast<SumThenDivideHook&>(*hooks[0]);
  ASSERT_FALSE(h.seen.empty());
  size_t per_step = h.seen.back().num_buckets;
  EXPECT_GE(per_step, 3u);
  for (size_t i = h.seen.size() - per_step; i < h.seen.size(); ++i) {
    const GradBucket& b = h.seen[i];
    EXPECT_EQ(b.index, i - (h.seen.size() - per_step));
    ASSERT_EQ(b.parameters.size(), b.offsets.size());
    EXPECT_EQ(b.offsets[0], 0u);
  }
  EXPECT_EQ(h.buckets_done, int64_t(h.seen.size()));
}

TEST(CommHook, RegistrationIsOnceAndBeforeTheFirstBackward) {
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 7});
    DDP ddp(model, pg, kSmallBuckets);
    EXPECT_EQ(ddp.comm_hook().name(), "allreduce");
    EXPECT_THROW(ddp.register_comm_hook(nullptr), InvalidArgument);
    ddp.register_comm_hook(std::make_shared<AllreduceHook>());
    try {
      ddp.register_comm_hook(std::make_shared<SumThenDivideHook>());
      ADD_FAILURE() << "a second hook was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("already registered"), std::string::npos);
    }
    DDP other(model, pg, kSmallBuckets);  // a fresh DDP whose first backward has run
    auto [x, y] = make_batch(kPerRank, 12, 5, 1);
    nn::cross_entropy(other(x), y).backward();
    try {
      other.register_comm_hook(std::make_shared<SumThenDivideHook>());
      ADD_FAILURE() << "a hook after the first backward was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("before the first backward"), std::string::npos);
    }
  });
}

// The ddp strategy saves its hook's state tagged with the hook's name, and restores it only
// into the same hook.
TEST(CommHook, StateTravelsThroughTheDdpStrategy) {
  Config cfg{ConfigRegistry{}};
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 7});
    optim::SGD opt(model.named_parameters(), {.lr = 0.1});
    DdpStrategy a({model, opt, pg, cfg}, kSmallBuckets);
    auto hook = std::make_shared<SumThenDivideHook>();
    a.ddp().register_comm_hook(hook);
    auto [x, y] = make_batch(kPerRank, 12, 5, 1);
    a.backward(nn::cross_entropy(a.forward(x), y), true);
    StrategyState saved = a.state();
    EXPECT_EQ(saved.values["comm_hook"], "sum_then_divide");

    DdpStrategy b({model, opt, pg, cfg}, kSmallBuckets);
    auto fresh = std::make_shared<SumThenDivideHook>();
    b.ddp().register_comm_hook(fresh);
    b.load_state(saved);
    EXPECT_EQ(fresh->buckets_done, hook->buckets_done);
    EXPECT_GT(fresh->buckets_done, 0);

    DdpStrategy c({model, opt, pg, cfg}, kSmallBuckets);  // default hook: nothing to restore
    c.load_state(saved);
  });
}

// fp16 compression, the custom hook of the guide (docs/ddp.md): gradients cast to half
// precision (scaled by 1/world first, so the sum cannot overflow), summed, cast back.
class Fp16Hook : public CommHook {
 public:
  std::string name() const override { return "fp16"; }
  comm::Work run(comm::ProcessGroup& g, const GradBucket& b) override {
    auto half = std::make_shared<std::vector<Float16>>(b.numel);
    float scale = 1.0f / float(g.size());
    for (size_t i = 0; i < b.numel; ++i) (*half)[i] = Float16(b.data[i] * scale);
    comm::AllreduceOptions o{
        .output = half->data(), .count = b.numel, .dtype = comm::DType::f16, .timeout = b.timeout};
    return g.allreduce_async(o).then([half, b] {
      for (size_t i = 0; i < b.numel; ++i) b.data[i] = float((*half)[i]);
      comm::Work w = comm::Work::pending("fp16 decompress");
      w.complete(nullptr);
      return w;
    });
  }
};

bool have_fashion() {
  return std::filesystem::exists(std::string(data::kFashionMnistDefaultDir) +
                                 "/t10k-labels-idx1-ubyte.gz");
}

// The MLP recipe (examples/fashion_mlp.toml) on 2 ranks for a third of an epoch (to keep the
// suite fast); test accuracy.
double fashion_accuracy(bool fp16, uint64_t seed) {
  data::FashionMnistOptions fo;
  fo.layout = data::ImageLayout::kFlat;
  auto train_set = std::make_shared<data::FashionMNIST>(data::FashionMNIST::train(fo));
  auto test_set = std::make_shared<data::FashionMNIST>(data::FashionMNIST::test(fo));
  double acc = 0;
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model({784, 512, 256, 10}, {.seed = seed});
    DDP ddp(model, pg);
    if (fp16) ddp.register_comm_hook(std::make_shared<Fp16Hook>());
    optim::SGD opt(model.named_parameters(), {.lr = 0.05, .momentum = 0.9});
    data::Loader loader(train_set, {.batch = 64,
                                    .sampler = data::DistributedSampler(r, kWorld, {.seed = seed}),
                                    .prefetch = 0});
    int steps = 0;
    for (auto& b : loader) {
      if (++steps > 150) break;
      opt.zero_grad();
      nn::cross_entropy(ddp(b.x), b.y).backward();
      opt.step();
    }
    if (r != 0) return;
    autograd::NoGradGuard no_grad;
    int64_t correct = 0;
    for (auto& b : data::Loader(test_set, {.batch = 1000, .prefetch = 0})) {
      auto pred = ops::argmax(model(b.x), -1).to_vector<int64_t>();
      auto y = b.y.to_vector<int64_t>();
      for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
    }
    acc = double(correct) / double(test_set->size());
  });
  return acc;
}

// What a user of compression asks: is it as good? Not more than 0.3 points below the default
// (mean over seeds; the spread between seeds is larger, either way).
TEST(CommHook, HalfPrecisionHookTrainsFashionMnistToTheDefaultsAccuracy) {
  if (!have_fashion()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  double base = 0, half = 0;
  constexpr int kSeeds = 3;
  for (int seed = 0; seed < kSeeds; ++seed) {
    base += fashion_accuracy(false, uint64_t(seed)) / kSeeds;
    half += fashion_accuracy(true, uint64_t(seed)) / kSeeds;
  }
  std::printf("mean test accuracy, %d seeds: fp16 hook %.4f, default %.4f\n", kSeeds, half, base);
  EXPECT_GT(base, 0.75);
  EXPECT_GE(half, base - 0.003) << "mean test accuracy over " << kSeeds << " seeds: fp16 " << half
                                << ", default " << base;
}

}  // namespace
}  // namespace cohort::parallel
