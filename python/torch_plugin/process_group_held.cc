// Operations held back before they reach the Communicator (process_group_cohort.h, "Held
// operations"): sends and receives, so that they are posted together, and small collectives,
// so that the thread that waits for one can run it itself.
#include "cohort/comm/collectives.h"
#include "cohort/core/error.h"
#include "process_group_cohort.h"

namespace cohort::torch_plugin {

namespace {

// A Work that failed before it started: waiting for it throws `error`.
comm::Work failed_work(const std::string& name, std::exception_ptr error) {
  comm::Work w = comm::Work::pending(name);
  w.complete(std::move(error));
  return w;
}

// The error of an operation that could not be issued, as the caller of launch() gets it.
std::exception_ptr issue_error() {
  try {
    rethrow_issue_error();
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

[[noreturn]] void rethrow_issue_error() {
  try {
    throw;
  } catch (const Error&) {
    // cohort's own error types reach Python as cohort's exceptions (cohort._core's)
    rethrow_with_context(std::current_exception(), "cohort backend: ");
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cohort backend: ", e.what());
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::hold_p2p(Launch l, comm::P2POp op) {
  const char* what = op.kind == comm::P2POp::kSend ? "send" : "recv";
  TORCH_CHECK(op.peer >= 0 && op.peer < size_ && op.peer != rank_, "cohort backend: ", what,
              " on rank ", rank_, ": peer ", op.peer, " must be another rank in [0, ", size_, ")");
  auto work = make_work(l);
  hold({work, op, {}});
  return work;
}

void ProcessGroupCohort::hold(Held h) {
  const bool collective = !h.p2p;
  h.work->unposted_in_ = this;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    if (collective && held_collectives_.load() == 0) held_since_ = Clock::now();
    held_.push_back(std::move(h));
    if (collective) held_collectives_.fetch_add(1);
  }
  // The completion thread issues a collective nobody asked for after kHeldFlush; ring it only
  // when it sleeps without a deadline (after a quiet spell), so a stream of small collectives
  // costs no wake-ups.
  if (collective && completer_untimed_.load()) {
    std::lock_guard<std::mutex> queue(queue_mu_);
    queue_cv_.notify_one();
  }
}

void ProcessGroupCohort::post_held(const WorkCohort* waiter) {
  c10::intrusive_ptr<WorkCohort> here;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    here = post_held_locked(waiter);
  }
  if (here) finish(*here);
}

c10::intrusive_ptr<WorkCohort> ProcessGroupCohort::post_held_locked(const WorkCohort* waiter) {
  if (held_.empty()) return {};
  // The waiter's own collective, alone: the Communicator runs it on this thread if it is idle.
  const bool run_here =
      waiter != nullptr && held_.size() == 1 && !held_[0].p2p && held_[0].work.get() == waiter;
  for (size_t i = 0; i < held_.size();) {
    if (held_[i].p2p) {
      i = post_p2p_run(i);
    } else {
      issue_held_collective(held_[i++], run_here);
    }
  }
  c10::intrusive_ptr<WorkCohort> finish_here;
  {
    std::lock_guard<std::mutex> queue(queue_mu_);
    for (Held& h : held_) {
      h.work->unposted_in_ = nullptr;
      // Finished on this thread only when nothing issued before it is unfinished: in order.
      if (run_here && unfinished_ == 0 && h.work->inner_.done()) {
        finish_here = h.work;
        continue;
      }
      queue_.push_back(h.work);
      ++unfinished_;
    }
  }
  held_.clear();
  held_collectives_.store(0);
  if (!finish_here) queue_cv_.notify_one();
  return finish_here;
}

void ProcessGroupCohort::issue_held_collective(Held& h, bool run_here) {
  WorkCohort& w = *h.work;
  try {
    w.inner_ = run_here ? comm_->issue_inline([&] { return h.start(*comm_); }) : h.start(*comm_);
    if (!w.inner_.name().empty()) w.name_ = w.inner_.name();
  } catch (...) {
    w.inner_ = failed_work(w.name_, issue_error());  // its waiter gets the error
  }
}

// Consecutive held sends and receives from held_[first], posted as one batch_send_recv (which
// moves them all at once). Returns the index after them.
size_t ProcessGroupCohort::post_p2p_run(size_t first) {
  size_t end = first;
  std::vector<comm::P2POp> ops;
  for (; end < held_.size() && held_[end].p2p; ++end) ops.push_back(*held_[end].p2p);
  comm::Work batch;
  try {
    batch = comm::batch_send_recv_async(*comm_, ops);
  } catch (...) {
    batch = failed_work("send/recv", std::current_exception());  // nothing was sent
  }
  for (size_t i = first; i < end; ++i) {
    held_[i].work->inner_ = batch;
    held_[i].work->name_ = batch.name();
  }
  return end;
}

void ProcessGroupCohort::flush_stale_held() {
  std::lock_guard<std::mutex> issue(issue_mu_);
  if (held_collectives_.load() == 0 || Clock::now() - held_since_ < kHeldFlush) return;
  for (const Held& h : held_) {
    if (h.p2p) return;  // sends and receives wait for their own trigger (post_held's rules)
  }
  post_held_locked(nullptr);
}

}  // namespace cohort::torch_plugin
