#include "cohort/comm/transport/backoff.h"

#include "cohort/comm/transport/futex.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace cohort::comm::transport {
namespace {

using namespace std::chrono;

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

void Notifier::notify() {
  gen_.fetch_add(1, std::memory_order_seq_cst);
  if (futex_.load(std::memory_order_seq_cst) != nullptr) {
    std::lock_guard<std::mutex> lock(ring_mu_);
    if (std::atomic<uint32_t>* word = futex_.load(std::memory_order_seq_cst)) {
      word->fetch_add(1, std::memory_order_seq_cst);
      futex_wake_all(word);
    }
  }
  if (waiters_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // orders with the waiter's check under mu_
    cv_.notify_all();
  }
}

void Notifier::also_ring(std::atomic<uint32_t>* word) {
  if (word != nullptr) {
    futex_.store(word, std::memory_order_seq_cst);
    return;
  }
  std::lock_guard<std::mutex> lock(ring_mu_);
  futex_.store(nullptr, std::memory_order_seq_cst);
}

void Notifier::wait_until(uint64_t seen, steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  waiters_.fetch_add(1, std::memory_order_acq_rel);
  cv_.wait_until(lock, until, [&] { return generation() != seen; });
  waiters_.fetch_sub(1, std::memory_order_acq_rel);
}

int pinned_cpu() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

Backoff::Policy Backoff::policy_for(int local_ranks, bool own_core) {
  Policy p;
  const bool pinned = own_core;
  if (pinned || local_ranks <= usable_cores()) {
    // Every rank has a core: spinning is free and gives the lowest latency.
    p.spin = microseconds(100);
    p.yield = milliseconds(2);
    p.max_sleep = microseconds(200);
    if (pinned) {
      // A core of its own (see Policy::adaptive): poll like MPI does, but not forever. Under
      // one competing process this held 17-21 GB/s at 4 MiB where the adaptive budget
      // collapsed to 0.5 GB/s (2 ranks, docs/benchmarks.md).
      p.spin = milliseconds(5);
      p.adaptive = false;
    }
  } else {
    // Oversubscribed: the peer we wait for may need our core. Yield at once (which hands it
    // the core), sleep only after a while: a sleeper wakes 10+ us after its data came, and with
    // 50 us of yielding 8 ranks on 2 cores slept through most steps (4 KiB allreduce 250-360 us
    // against 110-150 us with 500 us; Open MPI ~200 us).
    p.spin = nanoseconds(0);
    p.yield = microseconds(500);
    p.max_sleep = microseconds(1000);
  }
  return p;
}

Backoff::Backoff(const Policy& policy) : policy_(policy) {}

void AdaptiveSpin::update(bool paused, bool gave_up_spinning) {
  if (!paused) return;
  if (gave_up_spinning) {
    now_ = std::max(floor_, now_ / 2);
  } else {
    now_ = std::min(max_, now_ * 2 + microseconds(1));
  }
}

void Backoff::reset() {
  start_ = {};
  sleep_ = nanoseconds(0);
  polls_ = 0;
}

void Backoff::pause(Notifier* notifier, uint64_t seen, bool polling,
                    steady_clock::time_point deadline) {
  auto now = steady_clock::now();
  paused_ = true;
  if (polls_++ == 0) start_ = now;
  if (!polling && notifier) {
    // Only an event-loop thread can complete the op: sleep until it rings (or the deadline;
    // capped so that a lost wake-up costs at most a little latency).
    notifier->wait_until(seen, std::min(deadline, now + milliseconds(50)));
    return;
  }
  auto elapsed = now - start_;
  if (elapsed < policy_.spin) {
    for (int i = 0; i < 32; ++i) cpu_relax();
    return;
  }
  gave_up_ = true;
  if (elapsed < policy_.spin + policy_.yield) {
    sched_yield();
    return;
  }
  sleep_ = std::clamp<nanoseconds>(sleep_ * 2, microseconds(10), policy_.max_sleep);
  auto until = std::min(deadline, now + sleep_);
  if (notifier) {
    notifier->wait_until(seen, until);
  } else {
    std::this_thread::sleep_until(until);
  }
}

void Backoff::pause_background(Notifier* notifier, uint64_t seen,
                               steady_clock::time_point deadline) {
  sleep_ = std::clamp<nanoseconds>(sleep_ * 2, microseconds(20), microseconds(200));
  auto until = std::min(deadline, steady_clock::now() + sleep_);
  if (notifier) {
    notifier->wait_until(seen, until);
  } else {
    std::this_thread::sleep_until(until);
  }
}

}  // namespace cohort::comm::transport
