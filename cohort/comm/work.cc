#include "cohort/comm/work.h"

#include <algorithm>

#include "cohort/comm/transport/backoff.h"
#include "cohort/core/error.h"

namespace cohort::comm {
namespace {

// Counts the calling thread as a waiter of the communicator for the scope.
class WaiterScope {
 public:
  explicit WaiterScope(transport::WaitHint* h) : h_(h) {
    if (h_) h_->add_waiter();
  }
  ~WaiterScope() {
    if (h_) h_->remove_waiter();
  }
  WaiterScope(const WaiterScope&) = delete;
  WaiterScope& operator=(const WaiterScope&) = delete;

 private:
  transport::WaitHint* h_;
};

}  // namespace

struct Work::Chain {
  std::shared_ptr<State> first;
  std::function<Work()> next;
  // `next` runs outside `mu` (it may issue a blocking collective): done() and exception()
  // only look at `phase`, and a second waiter sleeps on `ran` until the first one is through.
  enum class Phase { kWaiting, kRunning, kRan };
  std::mutex mu;
  std::condition_variable ran;
  Phase phase = Phase::kWaiting;
  std::shared_ptr<State> second;
  std::exception_ptr error;  // what `next` threw (it is not run again)
};

Work Work::then(std::function<Work()> next) const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::then: empty Work");
  COHORT_CHECK_ARG(next != nullptr, "Work::then: empty continuation");
  auto state = std::make_shared<State>();
  state->name = state_->name + " then its continuation";
  state->chain = std::make_shared<Chain>();
  state->chain->first = state_;
  state->chain->next = std::move(next);
  return Work(std::move(state));
}

namespace {

std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()),
                  std::chrono::milliseconds(0));
}

}  // namespace

Work Work::advance_chain(const std::chrono::steady_clock::time_point* deadline) const {
  Chain& c = *state_->chain;
  Work first(c.first);
  if (deadline) {
    first.wait(left_until(*deadline));
  } else {
    first.wait();
  }
  std::unique_lock<std::mutex> lock(c.mu);
  if (c.phase == Chain::Phase::kWaiting) {
    c.phase = Chain::Phase::kRunning;
    lock.unlock();
    std::shared_ptr<State> second;
    std::exception_ptr error;
    try {
      Work w = c.next();
      COHORT_CHECK_ARG(w.valid(), "Work::then: the continuation of ", first.name(),
                       " returned an empty Work");
      second = w.state_;
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    c.second = std::move(second);
    c.error = error;
    c.phase = Chain::Phase::kRan;
    c.ran.notify_all();
  } else if (c.phase == Chain::Phase::kRunning) {  // another thread runs it: wait for it
    auto ran = [&] { return c.phase == Chain::Phase::kRan; };
    if (!deadline) {
      c.ran.wait(lock, ran);
    } else if (!c.ran.wait_until(lock, *deadline, ran)) {
      throw Timeout(detail::str(state_->name, ": the continuation of ", first.name(),
                                " is still running on another thread (Work::wait)"));
    }
  }
  if (c.error) std::rethrow_exception(c.error);
  return Work(c.second);
}

void Work::wait_issued() const noexcept {
  if (!state_) return;
  try {
    if (!state_->chain) {
      wait();
      return;
    }
    Chain& c = *state_->chain;
    Work(c.first).wait_issued();
    std::unique_lock<std::mutex> lock(c.mu);
    c.ran.wait(lock, [&] { return c.phase != Chain::Phase::kRunning; });
    std::shared_ptr<State> second = c.second;
    lock.unlock();
    if (second) Work(second).wait_issued();
  } catch (...) {
    // Only waiting: the error belongs to whoever waits for the result.
  }
}

Work Work::pending(std::string name, std::shared_ptr<transport::WaitHint> hint) {
  Work w;
  w.state_ = std::make_shared<State>();
  w.state_->name = std::move(name);
  w.state_->hint = std::move(hint);
  return w;
}

void Work::complete(std::exception_ptr error) const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->error = std::move(error);
    state_->done = true;
    state_->finished_at = std::chrono::steady_clock::now();
  }
  state_->cv.notify_all();
}

std::optional<std::chrono::steady_clock::time_point> Work::finished_at() const {
  if (!state_) return std::nullopt;
  if (state_->chain) {
    std::lock_guard<std::mutex> lock(state_->chain->mu);
    if (!state_->chain->second) return std::nullopt;
    return Work(state_->chain->second).finished_at();
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->done) return std::nullopt;
  return state_->finished_at;
}

bool Work::done() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::done: empty Work");
  if (state_->chain) {
    Chain& c = *state_->chain;
    Work first(c.first);
    if (!first.done()) return false;
    if (first.exception()) return true;
    std::shared_ptr<State> second;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.phase != Chain::Phase::kRan) return false;
      if (c.error) return true;
      second = c.second;
    }
    return Work(second).done();
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

void Work::wait() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
  if (state_->chain) return advance_chain(nullptr).wait();
  WaiterScope waiting(state_->hint.get());
  block_until_done();
}

void Work::wait_unobserved() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait_unobserved: empty Work");
  if (state_->chain) return wait();
  block_until_done();
}

void Work::block_until_done() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
  if (state_->chain) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    return advance_chain(&deadline).wait(left_until(deadline));
  }
  WaiterScope waiting(state_->hint.get());
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) {
    throw Timeout(detail::str(state_->name, " not done after ", timeout.count(),
                              " ms (Work::wait); it keeps running until its own deadline"));
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::exception() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::exception: empty Work");
  if (state_->chain) {
    Chain& c = *state_->chain;
    if (auto e = Work(c.first).exception()) return e;
    std::shared_ptr<State> second;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.phase != Chain::Phase::kRan) return nullptr;
      if (c.error) return c.error;
      second = c.second;
    }
    return Work(second).exception();
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

const std::string& Work::name() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::name: empty Work");
  return state_->name;
}

}  // namespace cohort::comm
