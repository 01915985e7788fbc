#pragma once
// Threads that complete the group's futures, and so run their callbacks: a callback may wait for
// another operation of the same group (torch's powerSGD_hook waits for its second allreduce
// inside the first one's callback), so the completion of that operation must not queue behind
// it on the same thread, as it did when the completion thread ran the callbacks itself (both
// ranks hung). A task goes to an idle thread, or to a new one while fewer than kMaxThreads exist:
// callbacks nested that deep would still wait for each other.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort::torch_plugin {

class CallbackPool {
 public:
  static constexpr size_t kMaxThreads = 16;

  CallbackPool() = default;
  CallbackPool(const CallbackPool&) = delete;
  CallbackPool& operator=(const CallbackPool&) = delete;
  ~CallbackPool() { shutdown(); }

  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (idle_ == 0 && threads_.size() < kMaxThreads) threads_.emplace_back([this] { loop(); });
    cv_.notify_one();
  }

  // Runs what was posted, then joins the threads.
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace cohort::torch_plugin
