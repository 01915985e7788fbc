#include "cohort/ps/push_lanes.h"

#include "cohort/core/error.h"

namespace cohort::ps {

PushLanes::PushLanes(size_t n) : lanes_(n) {
  for (size_t i = 0; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
}

PushLanes::~PushLanes() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void PushLanes::post(size_t i, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Lane& l = lanes_.at(i);
    COHORT_INTERNAL(!l.busy, "push lane ", i, " got a second push before the first was waited for");
    l.job = std::move(job);
    l.busy = true;
    l.error = nullptr;
  }
  work_.notify_all();
}

void PushLanes::wait_idle(std::unique_lock<std::mutex>& lock) {
  ended_.wait(lock, [&] {
    for (const Lane& l : lanes_)
      if (l.busy) return false;
    return true;
  });
}

std::vector<PushLanes::Clock::time_point> PushLanes::wait_all() {
  std::unique_lock<std::mutex> lock(mu_);
  wait_idle(lock);
  std::vector<Clock::time_point> ended;
  std::exception_ptr first;
  for (Lane& l : lanes_) {
    ended.push_back(l.ended);
    if (!first) first = l.error;
    l.error = nullptr;  // reported once
  }
  lock.unlock();
  if (first) std::rethrow_exception(first);
  return ended;
}

void PushLanes::drain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  wait_idle(lock);
  for (Lane& l : lanes_) l.error = nullptr;
}

void PushLanes::loop(size_t i) {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stop_ || lanes_[i].job; });
      if (stop_) return;  // the destructor drained first: no job is left behind
      job = std::move(lanes_[i].job);
      lanes_[i].job = nullptr;
    }
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // its captures go before the lane reports the end
    {
      std::lock_guard<std::mutex> lock(mu_);
      lanes_[i].error = error;
      lanes_[i].ended = Clock::now();
      lanes_[i].busy = false;
    }
    ended_.notify_all();
  }
}

}  // namespace cohort::ps
