// Work::then: chained asynchronous work (comm/work.h), with completions made by hand for the
// rules and with real collectives for the use.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/comm/process_group.h"
#include "cohort/comm/transport/backoff.h"
#include "cohort/core/error.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

Work done_work(const char* name) {
  Work w = Work::pending(name);
  w.complete(nullptr);
  return w;
}

// The completing thread stamps the time: an observer that looks later still gets it (DDP's
// bucket timings), and a chain reports its continuation's.
TEST(WorkThen, FinishedAtIsWhenTheOperationCompletedNotWhenSomeoneLooked) {
  Work w = Work::pending("op");
  EXPECT_FALSE(w.finished_at().has_value());
  const auto before = std::chrono::steady_clock::now();
  w.complete(nullptr);
  const auto after = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(w.finished_at().has_value());
  EXPECT_GE(*w.finished_at(), before);
  EXPECT_LE(*w.finished_at(), after);
  Work second = Work::pending("second");
  Work chain = done_work("first").then([&] { return second; });
  EXPECT_FALSE(chain.finished_at().has_value());  // the continuation is not issued yet
  second.complete(nullptr);
  chain.wait();
  EXPECT_EQ(chain.finished_at(), second.finished_at());
}

TEST(WorkThen, TheContinuationRunsOnceOnTheWaitingThreadNeverInDone) {
  Work first = Work::pending("first");
  int runs = 0;
  Work chain = first.then([&] {
    ++runs;
    return done_work("second");
  });
  EXPECT_FALSE(chain.done());
  first.complete(nullptr);
  EXPECT_FALSE(chain.done()) << "done() must not run the continuation";
  EXPECT_EQ(runs, 0);
  chain.wait();
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(chain.done());
  chain.wait();
  chain.wait(std::chrono::milliseconds(10));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(chain.exception(), nullptr);
}

TEST(WorkThen, AFailedFirstOperationFailsTheChainWithoutRunningTheContinuation) {
  Work first = Work::pending("allreduce #3");
  int runs = 0;
  Work chain = first.then([&] {
    ++runs;
    return done_work("second");
  });
  first.complete(std::make_exception_ptr(IoError("peer 1 closed the connection")));
  EXPECT_TRUE(chain.done());
  EXPECT_THROW(chain.wait(), IoError);
  EXPECT_NE(chain.exception(), nullptr);
  EXPECT_EQ(runs, 0);
}

TEST(WorkThen, AThrowingContinuationIsTheChainsErrorAndRunsOnce) {
  Work first = done_work("first");
  int runs = 0;
  Work chain = first.then([&]() -> Work {
    ++runs;
    throw InvalidArgument("bad bucket");
  });
  EXPECT_THROW(chain.wait(), InvalidArgument);
  EXPECT_THROW(chain.wait(), InvalidArgument);
  EXPECT_TRUE(chain.done());
  EXPECT_NE(chain.exception(), nullptr);
  EXPECT_EQ(runs, 1);
}

TEST(WorkThen, WaitWithATimeoutCoversTheWholeChain) {
  Work first = Work::pending("allreduce #7");
  Work chain = first.then([] { return done_work("second"); });
  EXPECT_THROW(chain.wait(std::chrono::milliseconds(20)), Timeout);
  Work stuck = done_work("first").then([] { return Work::pending("never"); });
  EXPECT_THROW(stuck.wait(std::chrono::milliseconds(20)), Timeout);
  EXPECT_THROW(Work().then([] { return done_work("x"); }), InvalidArgument);
  EXPECT_THROW(done_work("empty").then([] { return Work(); }).wait(), InvalidArgument);
}

// While one thread runs the continuation (which may block in a collective), done() and
// exception() answer at once and a second waiter waits for the same result.
TEST(WorkThen, DoneDoesNotBlockWhileTheContinuationRuns) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  Work second = Work::pending("second");
  Work chain = done_work("first").then([&] {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return second;
  });
  std::thread runner([&] { chain.wait(); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return entered; });
  }
  EXPECT_FALSE(chain.done());
  EXPECT_EQ(chain.exception(), nullptr);
  EXPECT_THROW(chain.wait(std::chrono::milliseconds(20)), Timeout);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  second.complete(nullptr);
  runner.join();
  chain.wait();
  EXPECT_TRUE(chain.done());
}

// Clean-up after a failure waits for what was issued and never issues more.
TEST(WorkThen, WaitIssuedNeverRunsTheContinuation) {
  int runs = 0;
  Work chain = done_work("first").then([&] {
    ++runs;
    return done_work("second");
  });
  chain.wait_issued();
  EXPECT_EQ(runs, 0);
  Work failed = Work::pending("failed");
  failed.complete(std::make_exception_ptr(IoError("peer gone")));
  failed
      .then([&] {
        ++runs;
        return done_work("x");
      })
      .wait_issued();  // does not throw
  EXPECT_EQ(runs, 0);
  chain.wait();
  EXPECT_EQ(runs, 1);
  chain.wait_issued();
}

// Two collectives in a row, as a comm hook issues them: sum, then (in the continuation) the
// second buffer scaled by the first result, on every rank.
TEST(WorkThen, ChainsTwoCollectivesOnThreeRanks) {
  constexpr int kRanks = 3;
  auto store = std::make_shared<rendezvous::HashStore>();
  testing::run_ranks(kRanks, [&](int r) {
    auto pg = make_process_group(Communicator::create(
        store, r, kRanks, testing::test_options(transport::TransportKind::kShm)));
    std::vector<float> a(1001, float(r + 1)), b(5, 1.0f);
    Work w = pg->allreduce_async({.output = a.data(), .count = a.size()}).then([&] {
      for (float& x : b) x *= a[0];  // 6 = 1 + 2 + 3
      return pg->allreduce_async({.output = b.data(), .count = b.size()});
    });
    w.wait();
    EXPECT_EQ(a[1000], 6.0f);
    EXPECT_EQ(b[4], 18.0f);  // 3 ranks x 6
  });
}

// A thread in wait() asks the transfer to poll hard (it is on the critical path); one in
// wait_unobserved() (a bookkeeping thread) does not, and still gets the operation's error.
TEST(WorkWait, OnlyAnObservedWaitCountsAsAWaiter) {
  auto hint = std::make_shared<transport::WaitHint>();
  Work w = Work::pending("allreduce #3", hint);
  std::exception_ptr unobserved_error;
  std::thread bookkeeper([&] {
    try {
      w.wait_unobserved();
    } catch (...) {
      unobserved_error = std::current_exception();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(hint->waiters.load(), 0);
  std::thread caller([&] { EXPECT_THROW(w.wait(), IoError); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (hint->waiters.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(hint->waiters.load(), 1);
  w.complete(std::make_exception_ptr(IoError("peer 1 went away")));
  bookkeeper.join();
  caller.join();
  EXPECT_EQ(hint->waiters.load(), 0);
  ASSERT_NE(unobserved_error, nullptr);
  EXPECT_THROW(std::rethrow_exception(unobserved_error), IoError);
}

}  // namespace
}  // namespace cohort::comm
