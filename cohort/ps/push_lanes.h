#pragma once
// PushLanes: one parked thread per parameter server, for pushes that start one server at a
// time (ps.overlap, docs/ps.md "Overlap with backward"). The backward thread posts server i's
// push from the grad-ready hook that completes server i's key range and goes on computing; the
// lane sends it and waits for the answer. step() then waits for every lane.
//
// Hand-over: a job and its result (error, the time it ended) cross between the posting thread
// and the lane under mu_ only; the job's own data (its range of the gradient and of the
// values) belongs to that lane until wait_all() returns, which is what makes the posting
// thread's later reads of it race-free. A lane's job of one step must be waited for before
// that lane gets the next (one push per server per step): posting to a busy lane is an
// Internal error, not a queue.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort::ps {

class PushLanes {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PushLanes(size_t n);
  // Waits for the jobs still running (bounded by their own request deadlines), then joins.
  ~PushLanes();
  PushLanes(const PushLanes&) = delete;
  PushLanes& operator=(const PushLanes&) = delete;

  // Runs `job` on lane i's thread and returns at once.
  void post(size_t i, std::function<void()> job);
  // Waits until every posted job has ended. Returns, by lane, when its last job ended (the
  // lanes given no job since the previous wait keep their older time). Once all have ended,
  // rethrows the error of the lowest lane whose job threw.
  std::vector<Clock::time_point> wait_all();
  // wait_all() that never throws (a failing worker's shutdown): errors are dropped.
  void drain() noexcept;

 private:
  struct Lane {
    std::function<void()> job;  // set by post(), cleared by the lane when it takes it
    bool busy = false;          // posted and not yet ended
    std::exception_ptr error;
    Clock::time_point ended;
  };
  void loop(size_t i);
  void wait_idle(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;  // guards lanes_ and stop_
  std::condition_variable work_, ended_;
  std::vector<Lane> lanes_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // started last, joined first
};

}  // namespace cohort::ps
