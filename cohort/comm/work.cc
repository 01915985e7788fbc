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
  std::mutex mu;  // guards running `next`, `second` and `error`
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

Work Work::advance_chain(const std::chrono::steady_clock::time_point* deadline) const {
  Chain& c = *state_->chain;
  Work first(c.first);
  if (deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *deadline - std::chrono::steady_clock::now());
    first.wait(std::max(left, std::chrono::milliseconds(0)));
  } else {
    first.wait();
  }
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.error) std::rethrow_exception(c.error);
  if (!c.second) {
    try {
      Work second = c.next();
      COHORT_CHECK_ARG(second.valid(), "Work::then: the continuation of ", first.name(),
                       " returned an empty Work");
      c.second = second.state_;
    } catch (...) {
      c.error = std::current_exception();
      throw;
    }
  }
  return Work(c.second);
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
  }
  state_->cv.notify_all();
}

bool Work::done() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::done: empty Work");
  if (state_->chain) {
    Chain& c = *state_->chain;
    Work first(c.first);
    if (!first.done()) return false;
    if (first.exception()) return true;
    std::lock_guard<std::mutex> lock(c.mu);
    return c.error || (c.second && Work(c.second).done());
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

void Work::wait() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
  if (state_->chain) return advance_chain(nullptr).wait();
  WaiterScope waiting(state_->hint.get());
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
  if (state_->chain) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    Work second = advance_chain(&deadline);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return second.wait(std::max(left, std::chrono::milliseconds(0)));
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
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.error) return c.error;
    return c.second ? Work(c.second).exception() : nullptr;
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

const std::string& Work::name() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::name: empty Work");
  return state_->name;
}

}  // namespace cohort::comm
