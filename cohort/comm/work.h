#pragma once
// Work: the handle of an asynchronous collective (DESIGN convention 3, after c10d's Work).
// The operation runs on the communicator's worker thread; an exception it throws is kept and
// rethrown by wait(). The buffers passed to the operation must stay alive until it is done.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
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
  // The operation's error once done (null if it succeeded or is still running).
  std::exception_ptr exception() const;
  // "allreduce #12" — names the operation in errors.
  const std::string& name() const;

  // Used by the communicator: a fresh pending Work and its completion. While a thread blocks
  // in wait(), `hint` (if any) counts it as a waiter, so the transfer polls hard again.
  static Work pending(std::string name, std::shared_ptr<transport::WaitHint> hint = nullptr);
  void complete(std::exception_ptr error) const;

 private:
  struct State {
    std::string name;
    mutable std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
    std::shared_ptr<transport::WaitHint> hint;
  };
  std::shared_ptr<State> state_;
};

}  // namespace cohort::comm
