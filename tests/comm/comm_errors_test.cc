// Failures a user must be able to rely on: a silent peer becomes a Timeout naming it within the
// deadline, a peer that goes away becomes an IoError naming it, ranks that disagree on a call
// get a CollectiveMismatch naming both calls, and asynchronous errors reach Work::wait.
#include <gtest/gtest.h>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using transport::TransportKind;

class CommErrors : public ::testing::TestWithParam<TransportKind> {
 protected:
  CommOptions options(int timeout_ms) {
    CommOptions o = test_options(GetParam());
    o.timeout = milliseconds(timeout_ms);
    return o;
  }
};

TEST_P(CommErrors, RankThatNeverCallsGivesTimeoutNamingItWithinDeadline) {
  with_comms(3, options(300), [&](Communicator& c) {
    std::vector<float> buf(1009, 1.0f);
    if (c.rank() == 2) {  // alive and connected, but never joins the allreduce
      std::this_thread::sleep_for(milliseconds(800));
      return;
    }
    auto start = steady_clock::now();
    try {
      allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
      ADD_FAILURE() << "rank " << c.rank() << ": allreduce did not fail";
    } catch (const Timeout& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("allreduce #0"), std::string::npos) << msg;
      // Rank 0 waits on rank 2 directly; rank 1 waits on rank 0 (which waits on 2).
      EXPECT_NE(msg.find(c.rank() == 0 ? "from rank 2" : "from rank 0"), std::string::npos) << msg;
    } catch (const IoError& e) {
      // A rank whose neighbour gave up first hears it at once, with the neighbour's reason,
      // which names the rank that never came.
      std::string msg = e.what();
      EXPECT_NE(msg.find("aborted"), std::string::npos) << msg;
      EXPECT_NE(msg.find("from rank 2"), std::string::npos) << msg;
    }
    EXPECT_LT(steady_clock::now() - start, milliseconds(1500));
    // The communicator refuses further work.
    std::string msg = error_of<IoError>([&] { barrier(c); });
    EXPECT_NE(msg.find("build a new one"), std::string::npos) << msg;
  });
}

TEST_P(CommErrors, PeerClosingMidCollectiveGivesIoErrorNamingIt) {
  with_comms(2, options(5000), [&](Communicator& c) {
    std::vector<float> buf(50000, 1.0f);
    if (c.rank() == 1) {
      // Take part in the first collective, then go away while rank 0 waits in the second.
      allreduce(c, {.output = buf.data(), .count = 10});
      std::this_thread::sleep_for(milliseconds(100));
      c.close();
      return;
    }
    allreduce(c, {.output = buf.data(), .count = 10});
    auto start = steady_clock::now();
    std::string msg = error_of<IoError>([&] {
      allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
    });
    EXPECT_LT(steady_clock::now() - start, milliseconds(2500));
    EXPECT_NE(msg.find("allreduce #1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1 closed"), std::string::npos) << msg;
  });
}

TEST_P(CommErrors, DifferentCountsAreAMismatchNamingBothCalls) {
  with_comms(2, options(5000), [&](Communicator& c) {
    std::vector<float> buf(16, 1.0f);
    size_t count = c.rank() == 0 ? 10 : 12;
    std::string msg =
        error_of<CollectiveMismatch>([&] { allreduce(c, {.output = buf.data(), .count = count}); });
    EXPECT_NE(msg.find("allreduce #0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count=10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count=12"), std::string::npos) << msg;
  });
}

TEST_P(CommErrors, DifferentDtypesAreAMismatch) {
  with_comms(2, options(5000), [&](Communicator& c) {
    std::vector<char> buf(64, 0);
    DType t = c.rank() == 0 ? DType::f32 : DType::i32;
    std::string msg = error_of<CollectiveMismatch>(
        [&] { allreduce(c, {.output = buf.data(), .count = 8, .dtype = t}); });
    EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
  });
}

TEST_P(CommErrors, DifferentOperationsFailFastNamingBoth) {
  with_comms(2, options(5000), [&](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    auto start = steady_clock::now();
    if (c.rank() == 1) {
      // Rank 1 receives rank 0's allreduce message where it expects the broadcast.
      std::string msg = error_of<CollectiveMismatch>(
          [&] { broadcast(c, {.buffer = buf.data(), .count = 8, .root = 0}); });
      EXPECT_NE(msg.find("broadcast(count=8, f32, root 0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("called allreduce(count=8, f32, sum"), std::string::npos) << msg;
    } else {
      // Rank 0 hears nothing useful back; it fails as soon as rank 1 drops the connection.
      EXPECT_THROW(allreduce(c, {.output = buf.data(), .count = 8}), Error);
    }
    EXPECT_LT(steady_clock::now() - start, milliseconds(2500));
  });
}

TEST_P(CommErrors, SendRecvTagMismatchNamesBothTags) {
  with_comms(2, options(5000), [&](Communicator& c) {
    float v[5] = {1, 2, 3, 4, 5};
    if (c.rank() == 0) {
      send(c, {.buffer = v, .count = 5, .peer = 1, .tag = 1});
      return;
    }
    std::string msg = error_of<CollectiveMismatch>(
        [&] { recv(c, {.buffer = v, .count = 5, .peer = 0, .tag = 2}); });
    EXPECT_NE(msg.find("send/recv(count=5, f32, tag 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("send/recv(count=5, f32, tag 1"), std::string::npos) << msg;
  });
}

TEST_P(CommErrors, AsyncErrorIsRethrownByWait) {
  with_comms(2, options(300), [&](Communicator& c) {
    std::vector<float> buf(100, 1.0f);
    if (c.rank() == 1) {
      std::this_thread::sleep_for(milliseconds(700));
      return;
    }
    Work w = allreduce_async(c, {.output = buf.data(), .count = buf.size()});
    // Not done within 50 ms: Work::wait(timeout) says so, the operation keeps running.
    std::string msg = error_of<Timeout>([&] { w.wait(milliseconds(50)); });
    EXPECT_NE(msg.find("allreduce #0 not done"), std::string::npos) << msg;
    // Then its own deadline (300 ms) passes on the worker thread, and wait() rethrows that.
    msg = error_of<Timeout>([&] { w.wait(); });
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_TRUE(w.done());
    EXPECT_NE(w.exception(), nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, CommErrors,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) {
                           return std::string(transport::transport_name(info.param));
                         });

}  // namespace
}  // namespace cohort::comm
