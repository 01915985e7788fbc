// Gradient compression hooks (parallel/ddp/compression_hook.h) on ranks as threads: fp16/bf16
// average within their precision, top-k's sparse and dense exchanges agree bit for bit,
// error-feedback residuals survive DDP's bucket rebuild, and the ddp strategy's keys.
#include <gtest/gtest.h>

#include <cmath>

#include "cohort/core/config.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/ddp/compression_hook.h"
#include "cohort/parallel/ddp/ddp.h"
#include "cohort/parallel/ddp/ddp_strategy.h"
#include "cohort/parallel/strategy_registry.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/hook_train_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;
using compress::Method;

// Every rank's gradients (concatenated) after one synced backward, with `options` (none: the
// default averaging hook).
std::vector<std::vector<float>> one_step_grads(std::optional<CompressionOptions> options) {
  std::vector<std::vector<float>> out(kWorld);
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 7});
    DDP ddp(model, pg, kSmallBuckets);
    if (options) ddp.register_comm_hook(std::make_shared<CompressionHook>(*options));
    auto [x, y] =
        rows_of(make_batch(kWorld * kPerRank, 12, 5, 300), r * kPerRank, (r + 1) * kPerRank);
    nn::cross_entropy(ddp(x), y).backward();
    for (const auto& [name, p] : model.named_parameters()) {
      auto g = p.grad().to_vector<float>();
      out[size_t(r)].insert(out[size_t(r)].end(), g.begin(), g.end());
    }
  });
  return out;
}

// Rank r's own gradient (no averaging), concatenated.
std::vector<float> local_grads(int r) {
  nn::MLP model(kSizes, {.seed = 7});
  auto [x, y] =
      rows_of(make_batch(kWorld * kPerRank, 12, 5, 300), r * kPerRank, (r + 1) * kPerRank);
  nn::cross_entropy(model(x), y).backward();
  std::vector<float> out;
  for (const auto& [name, p] : model.named_parameters()) {
    auto g = p.grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

// Parameters of every rank after `steps` SGD steps with `options`; the hooks in *hooks.
std::vector<std::vector<float>> train(
    CompressionOptions options, int steps,
    std::vector<std::shared_ptr<CompressionHook>>* hooks = nullptr) {
  if (hooks) hooks->assign(kWorld, nullptr);
  return train_with_hook(
      [&](int r) {
        auto hook = std::make_shared<CompressionHook>(options);
        if (hooks) (*hooks)[size_t(r)] = hook;
        return hook;
      },
      steps);
}

TEST(CompressionHook, HalfPrecisionAveragesWithinItsPrecision) {
  auto want = one_step_grads(std::nullopt);
  auto g0 = local_grads(0), g1 = local_grads(1);
  // Unit roundoff 2^-11 (fp16), 2^-8 (bf16); fp16 subnormals below 6.1e-5 are spaced 6e-8.
  for (auto [m, u, tiny] :
       {std::tuple{Method::kFp16, 0x1p-11, 6e-8}, {Method::kBf16, 0x1p-8, 0.0}}) {
    auto got = one_step_grads(CompressionOptions{.method = m});
    ASSERT_EQ(got[0].size(), want[0].size());
    EXPECT_EQ(got[0], got[1]) << compress::method_name(m) << ": ranks disagree";
    for (size_t i = 0; i < want[0].size(); ++i) {
      // Three roundings: each rank's cast of g/2, then the 16-bit sum.
      double halves = 0.5 * (std::fabs(g0[i]) + std::fabs(g1[i]));
      double tol = u * (halves + std::fabs(want[0][i])) + 2 * tiny + 1e-9;
      ASSERT_NEAR(got[0][i], want[0][i], tol) << compress::method_name(m) << " element " << i;
    }
  }
}

TEST(CompressionHook, TopKSparseAndDenseExchangesAgreeBitForBit) {
  CompressionOptions o{.method = Method::kTopK, .topk_ratio = 0.1};
  o.exchange = SparseExchange::kSparse;
  auto sparse = train(o, 5);
  o.exchange = SparseExchange::kDense;
  auto dense = train(o, 5);
  EXPECT_EQ(sparse[0], sparse[1]);
  EXPECT_EQ(dense[0], dense[1]);
  EXPECT_EQ(sparse[0], dense[0]);
  o.exchange = SparseExchange::kAuto;
  EXPECT_EQ(train(o, 5)[0], sparse[0]);
}

TEST(CompressionHook, TopKAtRatioOneIsTheDefaultAverage) {
  // k = numel: every entry sent, the residual stays zero: the plain average (up to the order
  // of additions, exact for two ranks).
  auto want = one_step_grads(std::nullopt);
  for (auto ex : {SparseExchange::kSparse, SparseExchange::kDense}) {
    auto got = one_step_grads(
        CompressionOptions{.method = Method::kTopK, .topk_ratio = 1.0, .exchange = ex});
    for (size_t i = 0; i < want[0].size(); ++i)
      ASSERT_FLOAT_EQ(got[0][i], want[0][i]) << "element " << i;
  }
}

TEST(CompressionHook, ResidualsSurviveTheBucketRebuildAndRanksStayInSync) {
  for (Method m : {Method::kTopK, Method::kRandomK}) {
    std::vector<std::shared_ptr<CompressionHook>> hooks;
    auto params = train({.method = m, .topk_ratio = 0.2}, 4, &hooks);
    EXPECT_EQ(params[0], params[1]) << compress::method_name(m);
    StrategyState st = hooks[0]->state();
    EXPECT_TRUE(st.per_rank);
    // Every parameter has its residual (none lost when DDP re-laid the buckets), and it is
    // not zero: 80% of each step's entries stayed behind.
    nn::MLP model(kSizes, {.seed = 7});
    EXPECT_EQ(st.tensors.size(), model.named_parameters().size());
    for (const auto& [name, p] : model.named_parameters()) {
      auto r = hooks[0]->residual_of(name);
      ASSERT_EQ(int64_t(r.size()), p.numel()) << name;
      double norm = 0;
      for (float x : r) norm += double(x) * x;
      EXPECT_GT(norm, 0) << compress::method_name(m) << " " << name;
    }
    // Residuals differ between ranks (their gradients do).
    auto first = model.named_parameters()[0].first;
    EXPECT_NE(hooks[0]->residual_of(first), hooks[1]->residual_of(first));
    // load_state puts them back where the next step finds them.
    CompressionHook fresh({.method = m, .topk_ratio = 0.2});
    fresh.load_state(st);
    EXPECT_EQ(fresh.residual_of(first), hooks[0]->residual_of(first));
  }
}

TEST(CompressionHook, WithoutErrorFeedbackNothingIsKept) {
  std::vector<std::shared_ptr<CompressionHook>> hooks;
  train({.method = Method::kTopK, .topk_ratio = 0.2, .error_feedback = false}, 2, &hooks);
  EXPECT_FALSE(hooks[0]->state().per_rank);
  EXPECT_TRUE(hooks[0]->state().tensors.empty());
}

TEST(CompressionHook, ReportsBytesRatioAndTimes) {
  std::vector<std::shared_ptr<CompressionHook>> hooks;
  train({.method = Method::kFp16}, 3, &hooks);
  nlohmann::json j = hooks[0]->take_interval_metrics();
  size_t numel = flat_params(nn::MLP(kSizes, {.seed = 7})).size();
  EXPECT_EQ(j["compress_raw_bytes"].get<double>(), double(numel * 4));
  EXPECT_EQ(j["compress_message_bytes"].get<double>(), double(numel * 2));
  EXPECT_EQ(j["compress_ratio"].get<double>(), 2.0);
  EXPECT_GT(j["compress_encode_ms"].get<double>(), 0.0);
  EXPECT_GT(j["compress_decode_ms"].get<double>(), 0.0);
  nlohmann::json s = hooks[0]->summary_metrics();
  EXPECT_EQ(s["compression"], "fp16");
  EXPECT_EQ(s["compress_ratio"].get<double>(), 2.0);
  EXPECT_EQ(hooks[0]->take_interval_metrics()["compress_raw_bytes"].get<double>(), 0.0);
}

// The [ddp] keys choose the hook; bad values are errors naming the key.
struct StrategyFixture {
  ConfigRegistry registry;
  Config cfg{registry};
  StrategyFixture() {
    add_strategy_keys(registry);
    cfg = Config(registry);
  }
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(CompressionHook, DdpStrategyKeysChooseTheHook) {
  StrategyFixture f;
  EXPECT_FALSE(compression_options_from(f.cfg).has_value());  // default: none
  f.cfg.set_from_string("ddp.compression", "topk", "test");
  f.cfg.set_from_string("ddp.topk_ratio", "0.05", "test");
  f.cfg.set_from_string("ddp.sparse_exchange", "dense", "test");
  auto o = compression_options_from(f.cfg);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->method, Method::kTopK);
  EXPECT_EQ(o->topk_ratio, 0.05);
  EXPECT_TRUE(o->error_feedback);
  EXPECT_EQ(o->exchange, SparseExchange::kDense);

  EXPECT_NE(error_of([&] {
              f.cfg.set_from_string("ddp.compression", "powersdg", "test");
            }).find("ddp.compression"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              f.cfg.set_from_string("ddp.topk_ratio", "1.5", "test");
            }).find("ddp.topk_ratio"),
            std::string::npos);
  f.cfg.set_from_string("ddp.topk_ratio", "0", "test");
  EXPECT_NE(error_of([&] { compression_options_from(f.cfg); }).find("ddp.topk_ratio = 0"),
            std::string::npos);

  f.cfg.set_from_string("ddp.compression", "bf16", "test");
  f.cfg.set_from_string("ddp.topk_ratio", "0.5", "test");
  run_world(kWorld, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 7});
    optim::SGD opt(model.named_parameters(), {.lr = 0.1});
    auto s = make_strategy("ddp", {model, opt, pg, f.cfg});
    EXPECT_EQ(static_cast<DdpStrategy&>(*s).ddp().comm_hook().name(), "bf16");
    auto [x, y] = make_batch(kPerRank, 12, 5, 1);
    s->backward(nn::cross_entropy(s->forward(x), y), true);
    EXPECT_EQ(s->metrics()->take_interval_metrics()["compress_ratio"].get<double>(), 2.0);
    EXPECT_EQ(s->metrics()->summary_metrics()["compression"], "bf16");
  });
}

}  // namespace
}  // namespace cohort::parallel
