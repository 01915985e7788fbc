// The transport's fault-injection seam (transport::FaultInjection): a stalled rank, a dropped
// connection and added latency, injected per rank through options, and what the other ranks
// see: Timeout or IoError within the deadline naming the culprit, or a slower but correct
// result.
#include <gtest/gtest.h>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using transport::TransportKind;

// Each rank's options from options_of(rank); fn runs on each rank's communicator.
void with_faults(int size, const std::function<CommOptions(int)>& options_of,
                 const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<rendezvous::HashStore>();
  run_ranks(size, [&](int r) {
    auto c = Communicator::create(store, r, size, options_of(r));
    fn(*c);
  });
}

int64_t ms_since(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
}

class FaultInjection : public ::testing::TestWithParam<TransportKind> {
 protected:
  CommOptions options(int timeout_ms) {
    CommOptions o = test_options(GetParam());
    o.timeout = milliseconds(timeout_ms);
    return o;
  }
};

TEST_P(FaultInjection, StalledRankGivesTimeoutNamingItOpAndSeqWithinDeadline) {
  const int timeout_ms = 200;
  auto opts = [&](int) {
    CommOptions o = options(timeout_ms);
    o.device.faults.stall_rank = 0;
    o.device.faults.stall_before_tag = 1;  // allreduce #0 runs; rank 0 freezes before #1
    o.device.faults.stall_for = milliseconds(1000);
    return o;
  };
  with_faults(2, opts, [&](Communicator& c) {
    std::vector<float> buf(1009, 1.0f);
    allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
    EXPECT_EQ(buf[0], 2.0f);
    auto start = steady_clock::now();
    if (c.rank() == 0) {  // wakes up after the peer gave up: its connection is gone
      std::string msg = error_of<IoError>([&] {
        allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
      });
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      return;
    }
    std::string msg = error_of<Timeout>([&] {
      allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
    });
    int64_t took = ms_since(start);
    EXPECT_GE(took, timeout_ms - 5);
    EXPECT_LT(took, timeout_ms + 600) << "the stall (1000 ms) must not hold the error back";
    EXPECT_NE(msg.find("allreduce #1 on rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from rank 0"), std::string::npos) << msg;
  });
}

TEST_P(FaultInjection, StalledRankFailsEveryOtherRankOfFourWithinDeadline) {
  const int timeout_ms = 200;
  auto opts = [&](int) {
    CommOptions o = options(timeout_ms);
    o.device.faults.stall_rank = 0;
    o.device.faults.stall_before_tag = 0;
    o.device.faults.stall_for = milliseconds(1000);
    return o;
  };
  with_faults(4, opts, [&](Communicator& c) {
    std::vector<float> buf(1009, 1.0f);
    auto start = steady_clock::now();
    try {
      allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
      ADD_FAILURE() << "rank " << c.rank() << ": allreduce did not fail";
    } catch (const Timeout& e) {
      // Rank 1 waits on rank 0 directly; the others may time out on a rank that waits on it.
      if (c.rank() == 1) {
        EXPECT_NE(std::string(e.what()).find("from rank 0"), std::string::npos);
      }
      EXPECT_NE(c.rank(), 0) << e.what();
    } catch (const IoError& e) {  // a neighbour gave up first and told this rank why
      EXPECT_NE(std::string(e.what()).find("allreduce #0"), std::string::npos) << e.what();
    }
    if (c.rank() != 0) {
      EXPECT_LT(ms_since(start), timeout_ms + 600) << "rank " << c.rank();
    }
  });
}

TEST_P(FaultInjection, DroppedConnectionGivesIoErrorNamingThePeerOnBothSides) {
  auto opts = [&](int) {
    CommOptions o = options(5000);
    o.device.faults.drop_rank = 1;
    o.device.faults.drop_peer = 0;
    o.device.faults.drop_after = 3;  // a 2-rank ring allreduce of one chunk sends 2 messages
    return o;
  };
  with_faults(2, opts, [&](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    auto start = steady_clock::now();
    allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
    std::string msg = error_of<IoError>([&] {
      allreduce(c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kRing});
    });
    EXPECT_LT(ms_since(start), 2000) << "a dropped link must fail at once, not at the deadline";
    EXPECT_NE(msg.find("allreduce #1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1 dropped its connection to rank 0"), std::string::npos) << msg;
    if (c.rank() == 0) {
      EXPECT_NE(msg.find("rank 1 aborted"), std::string::npos) << msg;
    }
  });
}

TEST_P(FaultInjection, DelaySlowsACollectiveButKeepsItCorrect) {
  const int delay_ms = 10;
  const size_t count = 4096;  // 16 KiB in 1 KiB chunks: 16 sends per rank on 2 ranks
  auto run = [&](int delay) {
    int64_t took = 0;
    auto opts = [&](int) {
      CommOptions o = options(20000);
      o.device.faults.delay = milliseconds(delay);
      return o;
    };
    with_faults(2, opts, [&](Communicator& c) {
      std::vector<float> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = float(i % 13) + float(c.rank());
      auto start = steady_clock::now();
      allreduce(c, {.output = buf.data(), .count = count, .algorithm = Algorithm::kRing});
      if (c.rank() == 0) took = ms_since(start);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(buf[i], float(2 * (i % 13) + 1)) << "element " << i;
      }
    });
    return took;
  };
  int64_t fast = run(0), slow = run(delay_ms);
  EXPECT_GE(slow, 16 * delay_ms) << "undelayed: " << fast << " ms";
  EXPECT_LT(fast, 16 * delay_ms);
}

TEST(FaultInjectionOptions, AreOffByDefault) {
  transport::FaultInjection f;
  EXPECT_EQ(f.delay.count(), 0);
  EXPECT_EQ(f.stall_rank, -1);
  EXPECT_EQ(f.drop_rank, -1);
}

INSTANTIATE_TEST_SUITE_P(Transports, FaultInjection,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return transport::transport_name(info.param); });

}  // namespace
}  // namespace cohort::comm
