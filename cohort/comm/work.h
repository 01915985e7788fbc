#pragma once
// Work: the handle of an asynchronous collective (DESIGN convention 3, after c10d's Work).
// The operation runs on the communicator's worker thread; an exception it throws is kept and
// rethrown by wait(). The buffers passed to the operation must stay alive until it is done.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace cohort::comm {

namespace transport {
struct WaitHint;
}

class Work {
 public:
  Work() = default;

  bool valid() const { return state_ != nullptr; }
  // True once the operation finished, successfully or not. Never blocks.
  bool done() const;
  // Blocks until done and rethrows the operation's exception. The operation has its own
  // deadline (the communicator's timeout), so this returns or throws within it.
  void wait() const;
  // As wait(), but throws cohort::Timeout if the operation is not done within `timeout` (it
  // keeps running; wait again or let it hit its own deadline).
  void wait(std::chrono::milliseconds timeout) const;
  // As wait(), but the calling thread does not count as a waiter (transport::WaitHint), so the
  // transfer keeps sleeping between polls as it does while nobody waits: for a bookkeeping
  // thread that follows every operation in turn (the torch plugin's completion thread) while
  // the issuing thread computes. Counting such a thread made the transfer spin on the core the
  // computation needs. For a chain, the same as wait().
  void wait_unobserved() const;
  // The operation's error once done (null if it succeeded or is still running).
  std::exception_ptr exception() const;
  // "allreduce #12" — names the operation in errors.
  const std::string& name() const;
  // When the operation finished, stamped by the thread that completed it (so an observer that
  // looks later still learns the true time); for a chain, its continuation's. nullopt while it
  // runs, and for a chain whose continuation has not been issued yet.
  std::optional<std::chrono::steady_clock::time_point> finished_at() const;

  // Chained asynchronous work (torch's Future.then), e.g. a DDP comm hook that runs two
  // collectives in a row (PowerSGD). The returned Work completes when the Work that `next`
  // returns completes. `next` runs at most once, after this operation succeeded, on the thread
  // that first waits for the returned Work (wait()); done() never runs it. That rule keeps the
  // collectives continuations issue in the same order on every rank whenever the ranks wait in
  // the same order (DDP waits for its buckets in index order). If this operation fails, the
  // chain fails with its error and `next` never runs; an exception from `next` is the chain's.
  Work then(std::function<Work()> next) const;
  // Waits for every operation already issued under this Work (for a chain: the first one, and
  // the continuation's Work if it already ran) without running a continuation, and without
  // throwing: for clean-up after a failure, where issuing new collectives could hang peers.
  void wait_issued() const noexcept;

  // Used by the communicator: a fresh pending Work and its completion. While a thread blocks
  // in wait(), `hint` (if any) counts it as a waiter, so the transfer polls hard again.
  static Work pending(std::string name, std::shared_ptr<transport::WaitHint> hint = nullptr);
  void complete(std::exception_ptr error) const;

 private:
  struct Chain;
  struct State {
    std::string name;
    std::shared_ptr<Chain> chain;  // set for a Work made by then()
    mutable std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::chrono::steady_clock::time_point finished_at;
    std::exception_ptr error;
    std::shared_ptr<transport::WaitHint> hint;
  };
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void block_until_done() const;  // then rethrows the operation's error
  // Chains: waits for the first operation (until `deadline`, if any), runs the continuation
  // once, and returns the Work it gave.
  Work advance_chain(const std::chrono::steady_clock::time_point* deadline) const;
  std::shared_ptr<State> state_;
};

}  // namespace cohort::comm
