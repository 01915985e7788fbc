// ps.overlap in one process (ps/push_overlap.h, ps/push_lanes.h, ps/ps_strategy.h): which
// servers' ranges a backward completes and in what order (the last server's first), a range
// that never completes is pushed by step(), the hidden time; then the ps strategy against two
// in-process servers: server 1 has applied this worker's push while backward is still running,
// the parameters are bit-identical to ps.overlap = false over several steps (also with gradient
// accumulation), clipping falls back to pushing in step(), and clipping after an overlapped
// backward is refused rather than silently pushing unclipped gradients.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/ops/ops.h"
#include "cohort/optim/sgd.h"
#include "cohort/ps/ps_strategy.h"
#include "cohort/ps/push_lanes.h"
#include "cohort/ps/push_overlap.h"
#include "cohort/ps/server.h"
#include "cohort/rendezvous/hash_store.h"

namespace cohort::ps {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Layout layout_of_sizes(const std::vector<int64_t>& sizes) {
  Layout l;
  for (size_t i = 0; i < sizes.size(); ++i) {
    l.params.push_back({"p" + std::to_string(i), sizes[i], l.total, i});
    l.total += sizes[i];
  }
  return l;
}

TEST(PsOverlapUnit, ARangeCompletesWhenEverySlotOverlappingItIsReady) {
  const Layout l = layout_of_sizes({4, 2, 6});  // keys [0,4) [4,6) [6,12)
  RangeTracker t(l, partition_keys(12, 3));     // servers [0,4) [4,8) [8,12)
  std::vector<int> done;
  t.ready(2, &done);  // the last slot spans servers 1 and 2: server 2 has no other
  EXPECT_EQ(done, std::vector<int>({2}));
  t.ready(2, &done);  // a second call for the same slot counts once
  EXPECT_EQ(done, std::vector<int>({2}));
  t.ready(1, &done);
  EXPECT_EQ(done, std::vector<int>({2, 1}));
  t.ready(0, &done);
  EXPECT_EQ(done, std::vector<int>({2, 1, 0}));
  t.reset();
  done.clear();
  t.ready(0, &done);
  EXPECT_EQ(done, std::vector<int>({0}));
}

TEST(PsOverlapUnit, CoveredSecondsIsTheUnionOfTheIntervals) {
  const Clock::time_point t0{};
  auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  EXPECT_DOUBLE_EQ(covered_seconds({}), 0.0);
  EXPECT_DOUBLE_EQ(covered_seconds({{at(0), at(10)}, {at(5), at(20)}, {at(30), at(40)}}), 0.030);
  EXPECT_DOUBLE_EQ(covered_seconds({{at(10), at(5)}}), 0.0);  // answered after backward ended
}

// The lanes run posted jobs in parallel, hand back each lane's end time, and rethrow the
// lowest lane's error once all have ended.
TEST(PsOverlapUnit, LanesRunJobsInParallelAndRethrowTheFirstError) {
  PushLanes lanes(2);
  std::atomic<int> ran{0};
  lanes.post(1, [&] { ++ran; });
  lanes.post(0, [&] { ++ran; });
  EXPECT_EQ(lanes.wait_all().size(), 2u);
  EXPECT_EQ(ran, 2);
  lanes.post(0, [] { throw IoError("lane 0"); });
  lanes.post(1, [] { throw IoError("lane 1"); });
  try {
    lanes.wait_all();
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "lane 0");
  }
  lanes.post(1, [&] { ++ran; });  // usable after an error
  lanes.wait_all();
  EXPECT_EQ(ran, 3);
}

// MLP({6, 8, 8, 3}): 155 keys; with 2 servers, server 1 owns [77, 155): part of layers.1.weight
// and everything after it, so it is complete before the first layer's gradients are.
TEST(PsOverlapUnit, BackwardStartsTheLastServersRangeFirstAndOnlyWhenArmed) {
  nn::MLP model({6, 8, 8, 3}, {.seed = 1});
  const NamedTensors params = model.named_parameters();
  const Layout layout = layout_of(params);
  int fired = 0;  // grad-ready hooks so far (ours run before the overlap's: registered first)
  for (const auto& [name, t] : params) {
    Tensor p = t;
    p.register_grad_ready_hook([&](Tensor&) { ++fired; });
  }
  std::vector<std::pair<int, int>> started;  // (server, hooks fired when it started)
  auto overlap = std::make_shared<PushOverlap>(layout, partition_keys(layout.total, 2),
                                               [&](int i) { started.emplace_back(i, fired); });
  PushOverlap::install(overlap, params, layout);
  auto loss = [&] {
    return nn::cross_entropy(model.forward(randn({4, 6}, 7)), from_vector_i64({0, 1, 2, 0}, {4}));
  };
  loss().backward();  // not armed (an accumulating micro-batch): no push
  EXPECT_TRUE(started.empty());
  fired = 0;
  overlap->arm();
  loss().backward();
  overlap->disarm();
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].first, 1);
  EXPECT_LT(started[0].second, 6) << "server 1 started only once every gradient was ready";
  EXPECT_EQ(started[1], std::make_pair(0, 6));
  overlap->push_rest();  // nothing left
  EXPECT_EQ(started.size(), 2u);
  const OverlapStep o = overlap->finish({Clock::now(), Clock::now()}, Clock::now());
  EXPECT_EQ(o.pushes_in_backward, 2);
  EXPECT_GT(o.push_pull_s, 0);
  EXPECT_FALSE(overlap->any_started());
}

// A parameter without a gradient never completes its range in backward: step() pushes it.
TEST(PsOverlapUnit, ARangeWithoutAGradientIsPushedByStep) {
  Tensor a = from_vector({1, 2}, {2}), b = from_vector({3, 4}, {2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const NamedTensors params = {{"a", a}, {"b", b}};
  const Layout layout = layout_of(params);
  std::vector<int> started;
  auto overlap = std::make_shared<PushOverlap>(layout, partition_keys(4, 2),
                                               [&](int i) { started.push_back(i); });
  PushOverlap::install(overlap, params, layout);
  overlap->arm();
  ops::sum(ops::mul(a, from_vector({1, 1}, {2}))).backward();  // b unused
  overlap->disarm();
  EXPECT_EQ(started, std::vector<int>({0}));
  overlap->push_rest();
  EXPECT_EQ(started, std::vector<int>({0, 1}));
  EXPECT_EQ(overlap->finish({Clock::now(), Clock::now()}, Clock::now()).pushes_in_backward, 1);
}

constexpr double kLr = 0.1;
const std::vector<int64_t> kSizes = {6, 8, 8, 3};

// Two in-process BSP servers for one worker, serving MLP(kSizes, seed 1).
struct Servers {
  Servers() : secret(net::Secret::generate()) {
    nn::MLP initial(kSizes, {.seed = 1});
    for (int i = 0; i < 2; ++i) {
      ServerOptions o;
      o.index = i;
      o.num_servers = 2;
      o.num_workers = 1;
      for (const auto& [name, t] : initial.named_parameters())
        o.params.push_back({name, t.clone_raw()});
      o.secret = secret;
      o.make_optimizer = [](optim::NamedParams p) {
        return std::make_unique<optim::SGD>(std::move(p),
                                            optim::SgdOptions{.lr = kLr, .momentum = 0.9});
      };
      o.make_schedule = [](int64_t) { return std::make_unique<optim::ConstantLr>(kLr); };
      servers.push_back(std::make_unique<ParamServer>(std::move(o)));
      publish_server(*store, i, servers.back()->address());
    }
  }
  WorkerOptions worker() const {
    return {.rank = 0,
            .num_workers = 1,
            .num_servers = 2,
            .store = store,
            .secret = secret,
            .timeout = 5s};
  }
  net::Secret secret;
  std::shared_ptr<rendezvous::Store> store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::unique_ptr<ParamServer>> servers;
};

struct Run {
  bool overlap = true;
  int micro_batches = 1;
  double clip = 0;  // > 0: optim.clip_grad_norm declared and set, and clip_grad_norm called
  bool wait_for_server_1 = false;  // in a hook of the first layer (see below)
};

// Three steps of the ps strategy against fresh servers; returns the parameters and the summary
// metrics. With wait_for_server_1, a hook on layers.0.weight (the first layer, whose gradient
// is among the last) waits up to 5 s for server 1 to have applied this step's push and
// records whether it did: only a push started during backward can get there.
std::pair<std::vector<float>, nlohmann::json> train(const Run& run, int* waited_ok = nullptr) {
  Servers servers;
  ConfigRegistry registry;
  ps_strategy_registration().add_keys(registry);
  if (run.clip > 0) registry.add({"optim.clip_grad_norm", ConfigType::kFloat, 0.0, "test"});
  Config cfg(registry);
  cfg.set("ps.overlap", run.overlap, "test");
  if (run.clip > 0) cfg.set("optim.clip_grad_norm", run.clip, "test");
  nn::MLP model(kSizes, {.seed = 99});  // the worker pulls the servers' values
  optim::SGD opt(model.named_parameters(), {.lr = kLr});
  PsStrategy s({.model = model, .optimizer = opt, .config = cfg}, servers.worker());
  int64_t step = 0;
  if (run.wait_for_server_1) {
    Tensor w = model.named_parameters()[0].second;
    w.register_grad_ready_hook([&](Tensor&) {
      const auto deadline = Clock::now() + 5s;
      while (servers.servers[1]->step() <= step && Clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
      *waited_ok += servers.servers[1]->step() == step + 1;
    });
  }
  for (; step < 3; ++step) {
    s.zero_grad();
    for (int m = 0; m < run.micro_batches; ++m) {
      Tensor x = randn({4, 6}, uint64_t(10 * step + m));
      Tensor loss = nn::cross_entropy(s.forward(x), from_vector_i64({0, 1, 2, 0}, {4}));
      s.backward(ops::mul_scalar(loss, 1.0 / run.micro_batches), m + 1 == run.micro_batches);
    }
    if (run.clip > 0) s.clip_grad_norm(run.clip);
    s.step();
  }
  std::vector<float> values;
  for (const auto& [name, t] : model.named_parameters()) {
    auto v = t.to_vector<float>();
    values.insert(values.end(), v.begin(), v.end());
  }
  nlohmann::json summary = s.summary_metrics();
  s.shutdown();
  return {values, summary};
}

TEST(PsOverlapStrategy, ServerOneHasTheStepWhileBackwardRunsAndTheResultIsBitIdentical) {
  int waited_ok = 0;
  auto [on, on_metrics] = train({.overlap = true, .wait_for_server_1 = true}, &waited_ok);
  EXPECT_EQ(waited_ok, 3) << "server 1 did not get this worker's push before backward ended";
  EXPECT_EQ(on_metrics["ps_overlap"], true);
  EXPECT_EQ(on_metrics["pushes_in_backward"], 3 * 2);
  EXPECT_GT(on_metrics["push_overlap_s"].get<double>(), 0);
  auto [off, off_metrics] = train({.overlap = false});
  EXPECT_EQ(off_metrics["ps_overlap"], false);
  EXPECT_EQ(off_metrics["pushes_in_backward"], 0);
  EXPECT_EQ(on, off);
}

TEST(PsOverlapStrategy, GradientAccumulationPushesOnlyFromTheSyncedBackward) {
  auto [on, on_metrics] = train({.overlap = true, .micro_batches = 2});
  EXPECT_EQ(on_metrics["pushes_in_backward"], 3 * 2);  // once per server per step
  auto [off, off_metrics] = train({.overlap = false, .micro_batches = 2});
  EXPECT_EQ(on, off);
}

TEST(PsOverlapStrategy, ClippingFallsBackToPushingInStep) {
  auto [on, on_metrics] = train({.overlap = true, .clip = 0.05});
  EXPECT_EQ(on_metrics["ps_overlap"], false);
  EXPECT_EQ(on_metrics["pushes_in_backward"], 0);
  auto [off, off_metrics] = train({.overlap = false, .clip = 0.05});
  EXPECT_EQ(on, off);
  auto [unclipped, m] = train({.overlap = false});
  EXPECT_NE(on, unclipped) << "clip 0.05 did not clip; lower it";
}

// A hand-written loop that clips after an overlapped backward would push unclipped gradients:
// refused, naming the knob.
TEST(PsOverlapStrategy, ClippingAfterAnOverlappedBackwardIsRefused) {
  Servers servers;
  ConfigRegistry registry;
  ps_strategy_registration().add_keys(registry);
  Config cfg(registry);
  nn::MLP model(kSizes, {.seed = 1});
  optim::SGD opt(model.named_parameters(), {.lr = kLr});
  PsStrategy s({.model = model, .optimizer = opt, .config = cfg}, servers.worker());
  s.backward(nn::cross_entropy(s.forward(randn({4, 6}, 1)), from_vector_i64({0, 1, 2, 0}, {4})),
             true);
  try {
    s.clip_grad_norm(1.0);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ps.overlap = false"), std::string::npos) << e.what();
  }
  s.step();  // the step still completes
  s.shutdown();
}

}  // namespace
}  // namespace cohort::ps
