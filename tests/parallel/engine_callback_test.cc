// autograd::queue_callback: what DDP relies on to finish its allreduces before backward()
// returns.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cohort/autograd/engine.h"
#include "cohort/ops/ops.h"

namespace cohort::autograd {
namespace {

Tensor leaf(std::vector<float> v) {
  Tensor t = from_vector(v, {int64_t(v.size())});
  t.set_requires_grad(true);
  return t;
}

TEST(QueueCallback, RunsInOrderAfterTheGraphAndBeforeBackwardReturns) {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  std::vector<std::string> log;
  x.register_grad_ready_hook([&](Tensor&) {
    log.push_back("hook x");
    queue_callback([&] {
      log.push_back("cb1");
      queue_callback([&] { log.push_back("cb3 (queued by cb1)"); });
    });
    queue_callback([&] { log.push_back("cb2"); });
  });
  w.register_grad_ready_hook([&](Tensor&) { log.push_back("hook w"); });
  ops::sum(ops::mul(x, w)).backward();
  log.push_back("returned");
  // w and x become ready inside the graph; every callback runs after both, in queue order.
  std::vector<std::string> want = {"hook w",  "hook x", "cb1", "cb2", "cb3 (queued by cb1)",
                                   "returned"};
  if (log[0] == "hook x") std::swap(want[0], want[1]);  // hook order is the engine's business
  EXPECT_EQ(log, want);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST(QueueCallback, ExceptionPropagatesAndTheQueueIsCleared) {
  Tensor x = leaf({1, 2});
  bool queue_failing = true;
  std::vector<std::string> log;
  x.register_grad_ready_hook([&](Tensor&) {
    if (!queue_failing) return;
    queue_callback([] { throw IoError("bucket 3 lost its peer"); });
    queue_callback([&] { log.push_back("after the throw"); });
  });
  try {
    ops::sum(x).backward();
    FAIL() << "backward did not rethrow the callback's error";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.what(), "bucket 3 lost its peer");
  }
  EXPECT_TRUE(log.empty()) << "a callback after the throwing one ran";
  // The next backward starts with an empty queue: nothing from the failed pass runs.
  queue_failing = false;
  x.set_grad(Tensor());
  ops::sum(x).backward();
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(QueueCallback, OutsideBackwardIsAnError) {
  try {
    queue_callback([] {});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no backward() is running"), std::string::npos)
        << e.what();
  }
}

TEST(QueueCallback, NestedBackwardHasItsOwnQueue) {
  Tensor x = leaf({1});
  Tensor y = leaf({2});
  Tensor inner = ops::sum(y);  // built outside: backward runs without grad mode
  std::vector<std::string> log;
  y.register_grad_ready_hook([&](Tensor&) { queue_callback([&] { log.push_back("inner cb"); }); });
  x.register_grad_ready_hook([&](Tensor&) {
    queue_callback([&] { log.push_back("outer cb"); });
    inner.backward();  // a backward inside a hook: its callbacks run before it returns
    log.push_back("inner returned");
  });
  ops::sum(x).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"inner cb", "inner returned", "outer cb"}));
}

}  // namespace
}  // namespace cohort::autograd
