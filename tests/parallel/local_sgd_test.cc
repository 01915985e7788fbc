// The local_sgd strategy (parallel/decentralized/local_sgd_strategy.h) with ranks as threads:
// replicas that part between averages and agree after each, optimizer state kept per rank or
// averaged, float buffers averaged and integer ones not, checkpoints as synchronization points,
// errors naming the key; and its FlatAverager over both transports.
#include <gtest/gtest.h>

#include "cohort/core/config.h"
#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/decentralized/local_sgd_strategy.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

const std::vector<int64_t> kSizes = {12, 16, 5};
constexpr int kWorld = 2;

// Per rank, after each step: the parameters and the optimizer's momentum, flattened.
struct Trace {
  std::vector<std::vector<float>> params, momentum;
};

std::vector<float> flat_momentum(const optim::Optimizer& opt) {
  std::vector<float> out;
  for (auto& [name, t] : opt.export_state().tensors) {
    auto v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Trains `steps` steps of SGD with momentum, each rank on its own batch, then (optionally)
// prepares a checkpoint; records every rank's trace.
std::vector<Trace> train(LocalSgdOptions o, int steps, bool checkpoint_at_end) {
  std::vector<Trace> out(kWorld);
  ConfigRegistry registry;
  Config cfg(registry);
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = uint64_t(3 + r)});  // different on purpose: rank 0's wins
    optim::SGD opt(model.named_parameters(), {.lr = 0.1, .momentum = 0.9});
    LocalSgdStrategy s({model, opt, pg, cfg}, o);
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = make_batch(8, 12, 5, 100 + uint64_t(step * kWorld + r));
      s.zero_grad();
      s.backward(nn::cross_entropy(s.forward(x), y), /*sync=*/true);
      s.step();
      if (checkpoint_at_end && step + 1 == steps) s.prepare_checkpoint();
      out[size_t(r)].params.push_back(flat_params(model));
      out[size_t(r)].momentum.push_back(flat_momentum(opt));
    }
  });
  return out;
}

TEST(LocalSgd, ReplicasPartBetweenAveragesAndAgreeAfterEach) {
  auto t = train({.period = 3}, 6, false);
  for (int step = 1; step <= 6; ++step) {
    bool averaged = step % 3 == 0;
    size_t i = size_t(step - 1);
    EXPECT_EQ(t[0].params[i] == t[1].params[i], averaged) << "after step " << step;
    // Momentum stays each rank's own.
    EXPECT_NE(t[0].momentum[i], t[1].momentum[i]) << "after step " << step;
  }
}

TEST(LocalSgd, AverageOptimizerStateAveragesMomentumToo) {
  auto t = train({.period = 2, .average_optimizer_state = true}, 4, false);
  EXPECT_NE(t[0].momentum[0], t[1].momentum[0]);
  EXPECT_EQ(t[0].momentum[1], t[1].momentum[1]);
  EXPECT_EQ(t[0].params[3], t[1].params[3]);
  EXPECT_EQ(t[0].momentum[3], t[1].momentum[3]);
}

// Mid-period, a checkpoint makes every rank hold what rank 0 saves.
TEST(LocalSgd, PrepareCheckpointSynchronizesParametersAndOptimizerState) {
  auto t = train({.period = 4}, 2, true);
  EXPECT_EQ(t[0].params[1], t[1].params[1]);
  EXPECT_EQ(t[0].momentum[1], t[1].momentum[1]);
  EXPECT_NE(t[0].params[0], t[1].params[0]);
}

// The warm-up averages gradients: the replicas never part, momentum included.
TEST(LocalSgd, WarmupKeepsReplicasIdentical) {
  auto t = train({.period = 8, .warmup_steps = 3}, 4, false);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t[0].params[i], t[1].params[i]) << "after step " << i + 1;
    EXPECT_EQ(t[0].momentum[i], t[1].momentum[i]) << "after step " << i + 1;
  }
  EXPECT_NE(t[0].params[3], t[1].params[3]);  // the first local step
}

// One allreduce of the packed list gives every rank the mean, in the shared arena (shm) or in
// ordinary memory (tcp: no arena); lists of different lengths fail on every rank.
TEST(FlatAverager, AveragesAListOverEitherTransport) {
  using comm::transport::TransportKind;
  for (TransportKind kind : {TransportKind::kShm, TransportKind::kTcp}) {
    comm::CommOptions o = ddp_comm_options();
    o.device.transport = kind;
    run_world(
        3,
        [&](int r, PG pg) {
          Tensor a = full({2, 3}, double(r)), b = full({4}, double(10 * r));
          Tensor strided = full({3, 2}, double(r)).t();  // not contiguous
          FlatAverager avg(*pg, "test tensors", std::chrono::milliseconds(0));
          avg.average({a, b, strided});
          EXPECT_EQ(a.to_vector<float>(), std::vector<float>(6, 1.0f));
          EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, 10.0f));
          EXPECT_EQ(strided.to_vector<float>(), std::vector<float>(6, 1.0f));
          EXPECT_EQ(avg.in_arena(), kind == TransportKind::kShm);
          Tensor extra = full({int64_t(r + 1)}, 1.0);  // 1, 2, 3 values
          try {
            avg.average({extra});
            ADD_FAILURE() << "lengths 1..3 accepted on rank " << r;
          } catch (const InvalidArgument& e) {
            EXPECT_NE(std::string(e.what()).find("test tensors"), std::string::npos) << e.what();
          }
        },
        o);
  }
}

// A linear layer that keeps a running statistic of its inputs in a float buffer (like
// BatchNorm's running mean) and a step counter in an integer one.
class WithStats : public nn::Module {
 public:
  WithStats() {
    linear_ = register_module("linear", std::make_shared<nn::Linear>(12, 5));
    mean_ = register_buffer("running_mean", zeros({}));
    count_ = register_buffer("count", zeros({}, DType::i64));
  }
  Tensor forward(const Tensor& x) override {
    std::vector<float> v = x.to_vector<float>();
    float sum = 0;
    for (float f : v) sum += f;
    mean_.data<float>()[0] = 0.5f * mean_.data<float>()[0] + 0.5f * sum / float(v.size());
    ++count_.data<int64_t>()[0];
    return linear_->forward(x);
  }
  std::string type_name() const override { return "WithStats"; }
  Tensor mean_, count_;

 private:
  std::shared_ptr<nn::Linear> linear_;
};

// Float buffers are averaged with the parameters; integer ones (counters) are left alone.
TEST(LocalSgd, AveragesFloatBuffersWithTheParameters) {
  std::vector<float> means(kWorld);
  std::vector<int64_t> counts(kWorld);
  ConfigRegistry registry;
  Config cfg(registry);
  run_world(kWorld, [&](int r, PG pg) {
    WithStats model;
    optim::SGD opt(model.named_parameters(), {.lr = 0.1});
    LocalSgdStrategy s({model, opt, pg, cfg}, {.period = 2});
    for (int step = 0; step < 2; ++step) {
      auto [x, y] = make_batch(8, 12, 5, 200 + uint64_t(step * kWorld + r));
      s.zero_grad();
      s.backward(nn::cross_entropy(s.forward(x), y), /*sync=*/true);
      s.step();
    }
    means[size_t(r)] = model.mean_.item<float>();
    counts[size_t(r)] = model.count_.item<int64_t>();
  });
  EXPECT_EQ(means[0], means[1]);
  EXPECT_NE(means[0], 0.0f);
  EXPECT_EQ(counts[0], 2);
  EXPECT_EQ(counts[1], 2);
}

TEST(LocalSgd, BadOptionsAndStateAreNamed) {
  ConfigRegistry registry;
  local_sgd_strategy_registration().add_keys(registry);
  Config cfg(registry);
  try {
    cfg.set("local_sgd.period", int64_t(0), "test");  // the registry's range, or ours
    local_sgd_options_from(cfg);
    FAIL() << "period 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("local_sgd.period"), std::string::npos) << e.what();
  }
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 3});
    optim::SGD opt(model.named_parameters(), {.lr = 0.1});
    // Options built by hand are checked before any collective, on every rank alike.
    try {
      LocalSgdStrategy bad({model, opt, pg, cfg}, {.period = 2, .warmup_steps = -1});
      ADD_FAILURE() << "warmup_steps -1 accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("local_sgd.warmup_steps"), std::string::npos);
    }
    LocalSgdStrategy s({model, opt, pg, cfg}, {.period = 2});
    StrategyState st;
    st.values = {{"stepz", 3}};
    EXPECT_THROW(s.load_state(st), InvalidArgument);
    st.values = {{"steps", 5}};
    s.load_state(st);
    EXPECT_EQ(s.steps(), 5);
    EXPECT_EQ(s.steps_since_average(), 0);
  });
}

}  // namespace
}  // namespace cohort::parallel
