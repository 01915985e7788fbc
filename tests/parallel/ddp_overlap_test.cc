// Overlap and bookkeeping, observed through a ProcessGroup decorator that logs every
// collective the DDP issues next to the grad-ready events (deterministic: event order, not time).
#include <gtest/gtest.h>

#include <mutex>

#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/parallel/ddp/ddp.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;

// Forwards everything to `inner`; logs allreduce launches into `log`. With fail_call = k, the
// k-th allreduce_async (0-based) is not sent: it returns a Work that failed with IoError, as a
// dead peer's would.
class RecordingGroup final : public comm::ForwardingProcessGroup {
 public:
  RecordingGroup(PG inner, std::vector<std::string>& log, int fail_call = -1)
      : ForwardingProcessGroup(std::move(inner)), log_(log), fail_call_(fail_call) {}
  const char* backend_name() const override { return "recording"; }
  comm::Work allreduce_async(const comm::AllreduceOptions& o) override {
    log_.push_back(detail::str("launch ", o.count));
    if (calls_++ == fail_call_) {
      comm::Work w = comm::Work::pending("allreduce #injected");
      w.complete(std::make_exception_ptr(IoError("peer 1 closed the connection")));
      return w;
    }
    return inner().allreduce_async(o);
  }
  // Ordinary memory for the buckets, as the recorded runs always had.
  comm::SharedBuffer alloc_shared(size_t) override { return {}; }

 private:
  std::vector<std::string>& log_;
  int fail_call_;
  int calls_ = 0;
};

// Logs "ready <name>" for every parameter. Registered after DDP's hooks, so for each parameter
// it runs right after DDP has seen that gradient (and launched whatever that completed).
void log_ready_events(nn::Module& m, std::vector<std::string>& log) {
  for (auto& [name, t] : m.named_parameters()) {
    std::string n = name;
    t.register_grad_ready_hook([&log, n](Tensor&) { log.push_back("ready " + n); });
  }
}

size_t index_of(const std::vector<std::string>& log, const std::string& e) {
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == e) return i;
  }
  ADD_FAILURE() << "no event " << e;
  return log.size();
}

const DdpOptions kSmallBuckets{.bucket_bytes = 256, .first_bucket_bytes = 64};

TEST(DdpOverlap, FirstBucketIsLaunchedBeforeBackwardReachesTheFirstLayer) {
  run_world(2, [&](int r, PG pg) {
    std::vector<std::string> log;
    nn::MLP model({6, 16, 12, 4}, {.seed = 1});
    DDP ddp(model, std::make_shared<RecordingGroup>(pg, log), kSmallBuckets);
    log_ready_events(model, log);
    auto [x, y] = make_batch(4, 6, 4, uint64_t(r));
    nn::cross_entropy(ddp(x), y).backward();
    log.push_back("backward returned");
    // The last layer's bias (4 floats) fills the first bucket: its allreduce is on the wire
    // while the engine still has two layers to go.
    size_t first_launch = index_of(log, "launch 4");
    EXPECT_EQ(first_launch, index_of(log, "ready layers.2.bias") - 1)
        << ::testing::PrintToString(log);
    EXPECT_LT(first_launch, index_of(log, "ready layers.0.weight"));
    int launches = 0;
    for (const auto& e : log) launches += e.rfind("launch", 0) == 0;
    EXPECT_EQ(launches, ddp.last_step().buckets);
    EXPECT_GE(launches, 4);
  });
}

// A model used in the opposite order of registration: "a" is registered first but runs last,
// so its gradients are ready first. The initial guess (reverse registration) puts b first and
// must hold a's bucket; after the first synced step buckets follow the observed order.
class Reversed : public nn::Module {
 public:
  Reversed() {
    a_ = register_module("a", std::make_shared<nn::Linear>(8, 4, nn::LinearOptions{.seed = 1}));
    b_ = register_module("b", std::make_shared<nn::Linear>(6, 8, nn::LinearOptions{.seed = 2}));
  }
  Tensor forward(const Tensor& x) override { return (*a_)(ops::relu((*b_)(x))); }
  std::string type_name() const override { return "Reversed"; }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
};

TEST(DdpOverlap, BucketsAreRebuiltInTheObservedReadyOrder) {
  run_world(2, [&](int r, PG pg) {
    std::vector<std::string> log;
    Reversed model;
    // Caps of 40 floats. Initial guess (b.bias 8, b.weight 48, a.bias 4, a.weight 32):
    // buckets [8] [48] [36]. Observed order (a.bias, a.weight, b.bias, b.weight): [36] [8] [48].
    DDP ddp(model, std::make_shared<RecordingGroup>(pg, log),
            {.bucket_bytes = 160, .first_bucket_bytes = 160});
    log_ready_events(model, log);
    auto [x, y] = make_batch(4, 6, 4, uint64_t(r));
    nn::cross_entropy(ddp(x), y).backward();
    // Step 1: a is ready first, but its bucket (2) is held until buckets 0 and 1 launched.
    // ("ready X" is logged just after DDP's hook for X, so a launch X completed precedes it.)
    std::vector<std::string> step1 = {"ready a.bias",  "ready a.weight", "launch 8",
                                      "ready b.bias",  "launch 48",      "launch 36",
                                      "ready b.weight"};
    EXPECT_EQ(log, step1);
    log.clear();
    model.zero_grad();
    nn::cross_entropy(ddp(x), y).backward();
    // Step 2: a's bucket comes first and launches as soon as a's gradients are in.
    std::vector<std::string> step2 = {"ready a.bias", "launch 36", "ready a.weight", "launch 8",
                                      "ready b.bias", "launch 48", "ready b.weight"};
    EXPECT_EQ(log, step2);
  });
}

TEST(DdpStats, CountBucketsAndBytesOfTheLastSyncedStep) {
  run_world(2, [&](int r, PG pg) {
    nn::MLP model({6, 16, 12, 4}, {.seed = 1});
    DDP ddp(model, pg, kSmallBuckets);
    auto [x, y] = make_batch(4, 6, 4, uint64_t(r));
    nn::cross_entropy(ddp(x), y).backward();
    const DdpStepStats& s = ddp.last_step();
    EXPECT_EQ(size_t(s.buckets), ddp.num_buckets());
    EXPECT_GE(s.buckets, 4);
    EXPECT_GT(s.bytes_sent, 0u);
    EXPECT_GT(s.bytes_received, 0u);
    EXPECT_GE(s.exposed_s, 0.0);
    EXPECT_GE(s.comm_s, 0.0);
    EXPECT_GE(s.backward_s, 0.0);
  });
}

// A failed bucket surfaces from backward() with its error type and the bucket's name, the
// later buckets are still drained, and the next step works (the reducer starts clean).
TEST(DdpFailures, FailedBucketNamesItselfAndTheNextStepRecovers) {
  run_world(1, [&](int, PG pg) {
    std::vector<std::string> log;
    nn::MLP model({6, 16, 12, 4}, {.seed = 1});
    DDP ddp(model, std::make_shared<RecordingGroup>(pg, log, /*fail_call=*/1), kSmallBuckets);
    auto [x, y] = make_batch(4, 6, 4, 1);
    try {
      nn::cross_entropy(ddp(x), y).backward();
      ADD_FAILURE() << "no error";
    } catch (const IoError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("DDP bucket 1 of"), std::string::npos) << msg;
      EXPECT_NE(msg.find("peer 1 closed the connection"), std::string::npos) << msg;
    }
    model.zero_grad();
    nn::cross_entropy(ddp(x), y).backward();
    EXPECT_TRUE(model.named_parameters()[0].second.grad().defined());
  });
}

// A backward that throws inside the graph drops DDP's end-of-pass callback; the next pass must
// not think it is still in the old one.
TEST(DdpFailures, AbandonedPassDoesNotPoisonTheNext) {
  run_world(2, [&](int r, PG pg) {
    nn::MLP model({6, 16, 4}, {.seed = 1});
    DDP ddp(model, pg, kSmallBuckets);
    bool fail = true;
    model.named_parameters()[0].second.register_grad_ready_hook([&](Tensor&) {
      if (fail) throw InvalidArgument("injected");
    });
    auto [x, y] = make_batch(4, 6, 4, uint64_t(r));
    EXPECT_THROW(nn::cross_entropy(ddp(x), y).backward(), InvalidArgument);
    fail = false;
    model.zero_grad();
    nn::cross_entropy(ddp(x), y).backward();
    EXPECT_EQ(ddp.last_step().buckets, int(ddp.num_buckets()));
  });
}

}  // namespace
}  // namespace cohort::parallel
