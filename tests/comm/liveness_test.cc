// Liveness (comm/liveness.h) and Communicator::abort: a peer that stops beating is named on every
// other rank within the detection time, the collective in flight fails at once with an IoError
// naming it (not at the collective deadline), sub-groups fail too, and ranks that keep beating
// are never reported.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cohort/comm/liveness.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using transport::TransportKind;

int64_t ms_since(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
}

LivenessOptions fast(int detect_ms) {
  LivenessOptions o;
  o.detect = milliseconds(detect_ms);
  return o;
}

TEST(Liveness, APeerThatStopsBeatingIsNamedWithinTheDetectionTime) {
  auto store = std::make_shared<rendezvous::HashStore>();
  std::atomic<int> reported{-2};
  std::atomic<int64_t> at_ms{-1};
  auto watcher = std::make_unique<Liveness>(store, 0, 3, fast(300), [&](const LostPeer& l) {
    reported = l.rank;
    at_ms = 0;
  });
  auto healthy = std::make_unique<Liveness>(store, 1, 3, fast(300), nullptr);
  auto doomed = std::make_unique<Liveness>(store, 2, 3, fast(300), nullptr);
  std::this_thread::sleep_for(milliseconds(600));  // two detection times: nobody is reported
  EXPECT_EQ(reported.load(), -2);
  EXPECT_EQ(watcher->lost().rank, -1);
  const auto stop = steady_clock::now();
  doomed.reset();  // rank 2 stops beating (died, stopped, or cut off)
  while (reported.load() == -2 && ms_since(stop) < 3000)
    std::this_thread::sleep_for(milliseconds(5));
  const int64_t took = ms_since(stop);
  EXPECT_EQ(reported.load(), 2);
  EXPECT_GE(took, 300 - 50);
  EXPECT_LT(took, 300 + 300) << "named within the detection time plus a look";
  const std::string why = watcher->lost().reason;
  EXPECT_NE(why.find("rank 2 sent no heartbeat for"), std::string::npos) << why;
  EXPECT_NE(why.find("elastic.detect_s = 0.3)"), std::string::npos) << why;
}

class LivenessAbort : public ::testing::TestWithParam<TransportKind> {};

// Rank 1 beats, then freezes (its beat stops and it never joins the collective): rank 0's
// allreduce, whose deadline is a minute away, fails within the detection time naming rank 1.
TEST_P(LivenessAbort, TheCollectiveInFlightFailsNamingTheLostRank) {
  auto store = std::make_shared<rendezvous::HashStore>();
  std::atomic<bool> released{false};
  run_ranks(2, [&](int r) {
    CommOptions o = test_options(GetParam());
    o.timeout = std::chrono::seconds(60);
    auto c = Communicator::create(store, r, 2, o);
    auto live = std::make_unique<Liveness>(store, r, 2, fast(300), abort_on_loss(c));
    std::vector<float> buf(4096, 1.0f);
    allreduce(*c, {.output = buf.data(), .count = buf.size()});
    EXPECT_EQ(buf[0], 2.0f);
    if (r == 1) {
      live.reset();  // frozen: no beat, no collective
      while (!released) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    const auto start = steady_clock::now();
    std::string msg =
        error_of<IoError>([&] { allreduce(*c, {.output = buf.data(), .count = buf.size()}); });
    EXPECT_LT(ms_since(start), 300 + 500) << msg;
    EXPECT_NE(msg.find("rank 1 sent no heartbeat"), std::string::npos) << msg;
    // Broken from then on, as after any IoError: the next call fails at once.
    EXPECT_THROW(allreduce(*c, {.output = buf.data(), .count = buf.size()}), IoError);
    released = true;
  });
}

// Communicator::abort from another thread reaches the sub-groups made from it.
TEST_P(LivenessAbort, AbortReachesSubGroups) {
  auto store = std::make_shared<rendezvous::HashStore>();
  std::atomic<bool> released{false};
  run_ranks(2, [&](int r) {
    CommOptions o = test_options(GetParam());
    o.timeout = std::chrono::seconds(60);
    auto c = Communicator::create(store, r, 2, o);
    auto sub = c->new_group({0, 1});
    if (r == 1) {
      while (!released) std::this_thread::sleep_for(milliseconds(5));
      return;
    }
    std::thread later([&] {
      std::this_thread::sleep_for(milliseconds(100));
      c->abort("told to stop by the test");
    });
    std::vector<float> buf(16, 1.0f);
    const auto start = steady_clock::now();
    std::string msg =
        error_of<IoError>([&] { allreduce(*sub, {.output = buf.data(), .count = 16}); });
    later.join();
    EXPECT_LT(ms_since(start), 2000) << msg;
    EXPECT_NE(msg.find("told to stop by the test"), std::string::npos) << msg;
    released = true;
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, LivenessAbort,
                         ::testing::Values(TransportKind::kShm, TransportKind::kTcp),
                         [](const auto& info) { return transport::transport_name(info.param); });

}  // namespace
}  // namespace cohort::comm
