#pragma once
// How a waiting rank spends its time. Shared-memory transfers are driven by the waiting thread
// itself, so a waiter polls; but tests run 4-8 ranks on 2 cores, where a spinning rank steals
// the core its peer needs. So: spin briefly (only when every local rank can have a core), then
// sched_yield, then sleep in growing steps (or on the Notifier, which the TCP event loop rings
// when it completes an op).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace cohort::comm::transport {

// Spin budget that adapts to how waits end. It halves when spinning did not suffice (the peer
// we wait for probably needs our core: other processes, or ranks sharing a core), grows back
// when a wait ended while spinning, and stays put for waits that never had to pause: those say
// nothing about spinning. (Growing on them made a rank that alternately waits and finds its
// data ready oscillate between the full and half budget, i.e. spin ~100 us per step while its
// peer waited for the core.) It never drops below a small floor, so that a budget halved
// during a burst of contention finds out by itself when spinning pays again. Starts at, and
// never exceeds, the policy's spin; a zero policy spin (oversubscribed host) stays zero.
class AdaptiveSpin {
 public:
  static constexpr std::chrono::nanoseconds kFloor{std::chrono::microseconds(2)};
  void reset(std::chrono::nanoseconds max, bool adaptive = true) {
    max_ = now_ = max;
    floor_ = adaptive ? std::min(max, kFloor) : max;
  }
  std::chrono::nanoseconds now() const { return now_; }
  // `paused`: the wait polled in vain at least once; `gave_up_spinning`: it went past spinning.
  void update(bool paused, bool gave_up_spinning);

 private:
  std::chrono::nanoseconds max_{0}, now_{0}, floor_{0};
};

// A generation counter with a condition variable: waiters sleep until it moves.
class Notifier {
 public:
  uint64_t generation() const { return gen_.load(std::memory_order_seq_cst); }
  void notify();
  // Sleeps until the generation differs from `seen` or until `until`.
  void wait_until(uint64_t seen, std::chrono::steady_clock::time_point until);
  // While set, notify() also rings this futex word: a thread asleep on a shared-memory
  // doorbell (ShmPair::sleep_until_peer) wakes for local news too. Set it, then check the
  // generation, then sleep; clear it after (nullptr).
  // Clearing waits for a notify() that is ringing the word, so that the memory (a shared
  // segment) may be unmapped once it returns. One sleeper at a time (a Context is driven by one
  // thread at a time).
  void also_ring(std::atomic<uint32_t>* word);

 private:
  std::atomic<uint64_t> gen_{0};
  std::atomic<std::atomic<uint32_t>*> futex_{nullptr};
  std::mutex ring_mu_;  // held while notify() rings futex_, and while also_ring clears it
  std::atomic<int> waiters_{0};
  std::mutex mu_;  // only for the condition variable
  std::condition_variable cv_;
};

// Whether the thread driving a transfer should poll hard (spin, then yield) or sleep between
// polls. An asynchronous collective runs on the communicator's worker thread while the thread
// that issued it keeps computing (DDP's backward): spinning or yielding there steals the core
// the computation needs, most of all when workers fill every core. So the worker sleeps
// between polls, unless some thread blocks on the result (Work::wait): then the transfer is
// on the critical path again and it polls hard. Shared by a Communicator, its Context and the
// Works it hands out; all fields are read and written with relaxed atomics.
struct WaitHint {
  std::atomic<bool> background{false};  // the op in progress runs on the worker thread
  std::atomic<int> waiters{0};          // threads blocked in Work::wait on this communicator
  // The transport's notifier (set once, before any operation). A new waiter rings it, so that
  // a worker sleeping between polls (up to 200 us) polls hard at once: the moment DDP's
  // end of backward starts waiting is when the last bucket's latency counts.
  std::shared_ptr<Notifier> wake;
  void add_waiter() {
    waiters.fetch_add(1, std::memory_order_relaxed);
    if (wake) wake->notify();
  }
  void remove_waiter() { waiters.fetch_sub(1, std::memory_order_relaxed); }
  bool sleep_between_polls() const {
    return background.load(std::memory_order_relaxed) &&
           waiters.load(std::memory_order_relaxed) == 0;
  }
};

// The CPU this thread is pinned to, or -1 when its mask has more than one.
int pinned_cpu();

class Backoff {
 public:
  struct Policy {
    std::chrono::nanoseconds spin{0};  // busy-poll this long first
    // Whether the spin budget adapts (AdaptiveSpin). Not for a rank pinned to a core of its
    // own: nobody else of the job needs that core, and a budget halved while the peer was
    // descheduled made it yield, which on a loaded machine hands the core to another process
    // for a whole scheduler slice.
    bool adaptive = true;
    std::chrono::nanoseconds yield{0};  // then sched_yield this long
    std::chrono::nanoseconds max_sleep{std::chrono::microseconds(500)};
  };
  // Spins only when this host's ranks of the context fit on its cores. `own_core`: this rank is
  // pinned to one CPU that no other rank of the context on this host is pinned to (as by
  // mpirun --bind-to core or `cohort run --bind`): it polls long, without adapting. (Taking a
  // one-CPU mask for "more ranks than cores" made pinned ranks yield on every wait, and beside
  // a busy process each yield cost a scheduler slice, ~4 ms, per collective; but ranks that
  // all inherited the same single CPU must not spin, so the pins are compared across ranks.)
  static Policy policy_for(int local_ranks, bool own_core = false);

  explicit Backoff(const Policy& policy);
  // Call after each unproductive poll. `notifier` may be null. `polling` tells whether some
  // caller-driven pair has pending work (then sleeps stay short, since nobody rings for it).
  void pause(Notifier* notifier, uint64_t seen, bool polling,
             std::chrono::steady_clock::time_point deadline);
  // A poll in vain while the transfer runs in the background (WaitHint): sleep, in steps that
  // grow from 20 to 200 us, without spinning or yielding.
  void pause_background(Notifier* notifier, uint64_t seen,
                        std::chrono::steady_clock::time_point deadline);
  // Progress was made: start over with spinning.
  void reset();
  // Whether some pause went past the spin phase (yielded or slept) since construction.
  bool gave_up_spinning() const { return gave_up_; }
  // Whether pause() was called at all since construction.
  bool paused() const { return paused_; }

 private:
  Policy policy_;
  bool gave_up_ = false;
  bool paused_ = false;
  std::chrono::steady_clock::time_point start_{};
  std::chrono::nanoseconds sleep_{0};
  uint32_t polls_ = 0;
};

}  // namespace cohort::comm::transport
