#include "cohort/comm/work.h"

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
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

void Work::wait() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
  WaiterScope waiting(state_->hint.get());
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::wait: empty Work");
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
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

const std::string& Work::name() const {
  COHORT_CHECK_ARG(state_ != nullptr, "Work::name: empty Work");
  return state_->name;
}

}  // namespace cohort::comm
