// The shared-memory pair's doorbell (shm_segment.h Doorbell, Context::sleep_until_peer): a
// background waiter sleeps until its peer moves, not in timed polls. Each test gives the sleep
// a far deadline, so a missing ring shows as a test that takes the whole deadline, not as a
// timing threshold that a loaded machine could cross.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cohort/comm/transport/context.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/comm/comm_test_util.h"

namespace cohort::comm::transport {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;

constexpr auto kFar = 60s;    // what a sleep would last if nothing rang
constexpr auto kWoken = 30s;  // woken well before it
constexpr Header kHeader{1};

std::unique_ptr<Context> shm_context(rendezvous::Store& store, int rank) {
  DeviceOptions o;
  o.transport = TransportKind::kShm;
  return Context::create(Device(o), store, rank, 2);
}

// Sleeps on the doorbell of `peer`'s pair; returns how long it slept.
Clock::duration sleep_on_peer(Context& ctx, int peer) {
  uint64_t seen = ctx.notifier_generation();
  auto start = Clock::now();
  EXPECT_TRUE(ctx.sleep_until_peer(peer, start + kFar, seen));
  return Clock::now() - start;
}

TEST(Doorbell, ASleepingReceiverWakesWhenItsPeerSends) {
  rendezvous::HashStore store;
  run_ranks(2, [&](int r) {
    auto ctx = shm_context(store, r);
    int value = 0;
    if (r == 0) {
      Request recv = ctx->recv(1, &value, sizeof(value), kHeader);
      while (!recv.done()) {
        EXPECT_LT(sleep_on_peer(*ctx, 1), kWoken);
      }
      EXPECT_EQ(value, 42);
    } else {
      std::this_thread::sleep_for(50ms);  // the receiver is asleep by now
      value = 42;
      ctx->send(0, &value, sizeof(value), kHeader).wait(Clock::now() + 10s);
    }
  });
}

TEST(Doorbell, ALocalNotifyWakesTheSleeperToo) {
  // A thread that starts waiting on the result (WaitHint::add_waiter) must not find the
  // worker asleep on the peer's doorbell.
  rendezvous::HashStore store;
  std::atomic<bool> finished{false};
  run_ranks(2, [&](int r) {
    auto ctx = shm_context(store, r);
    if (r != 0) {  // stays connected: its close would ring the sleeper too
      while (!finished) std::this_thread::sleep_for(1ms);
      return;
    }
    auto hint = std::make_shared<WaitHint>();
    ctx->set_wait_hint(hint);
    std::thread waiter([&] {
      std::this_thread::sleep_for(50ms);
      hint->add_waiter();
    });
    EXPECT_LT(sleep_on_peer(*ctx, 1), kWoken);
    waiter.join();
    hint->remove_waiter();
    finished = true;
  });
}

TEST(Doorbell, APeerThatClosesRingsTheSleeper) {
  rendezvous::HashStore store;
  run_ranks(2, [&](int r) {
    auto ctx = shm_context(store, r);
    if (r == 0) {
      EXPECT_LT(sleep_on_peer(*ctx, 1), kWoken);
    } else {
      std::this_thread::sleep_for(50ms);
      ctx->close();
    }
  });
}

TEST(Doorbell, TcpPairsHaveNoneAndSaySo) {
  rendezvous::HashStore store;
  run_ranks(2, [&](int r) {
    DeviceOptions o;
    o.transport = TransportKind::kTcp;
    auto ctx = Context::create(Device(o), store, r, 2);
    auto start = Clock::now();
    EXPECT_FALSE(ctx->sleep_until_peer(1 - r, start + kFar, ctx->notifier_generation()));
    EXPECT_LT(Clock::now() - start, kWoken);
  });
}

}  // namespace
}  // namespace cohort::comm::transport
