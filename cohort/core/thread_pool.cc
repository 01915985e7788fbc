#include "cohort/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cohort/core/local_workers.h"

namespace cohort {
namespace {

thread_local bool t_inside_parallel = false;

// Workers sleep on a condition variable between jobs; a job is one (fn, chunk list) broadcast
// to all workers, who claim chunks with an atomic counter. The caller works too.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return int(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& body) {
    std::unique_lock<std::mutex> lock(run_mu_);  // one job at a time
    {
      std::lock_guard<std::mutex> l(mu_);
      body_ = &body;
      chunks_ = chunks;
      next_.store(0);
      pending_ = chunks;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    work_on_chunks();
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return pending_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work_on_chunks() {
    t_inside_parallel = true;
    for (;;) {
      int64_t c = next_.fetch_add(1);
      if (c >= chunks_) break;
      try {
        (*body_.load())(c);
      } catch (...) {
        std::lock_guard<std::mutex> l(mu_);
        if (!error_) error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> l(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
    t_inside_parallel = false;
  }
  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (!body_) continue;
      }
      work_on_chunks();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mu_;
  std::mutex mu_;  // guards everything below except next_
  std::condition_variable cv_, done_cv_;
  // Atomic: a late worker reads them without mu_ while claiming a chunk.
  std::atomic<const std::function<void(int64_t)>*> body_{nullptr};
  std::atomic<int64_t> chunks_{0};
  int64_t pending_ = 0;
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

std::mutex g_pool_mu;
std::unique_ptr<Pool>& pool_slot() {
  static std::unique_ptr<Pool> pool;
  return pool;
}
Pool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  auto& p = pool_slot();
  if (!p) p = std::make_unique<Pool>(env_int("COHORT_NUM_THREADS", default_num_threads()));
  return *p;
}

}  // namespace

int default_num_threads() {
  int cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, cores / local_workers_from_env());  // whichever launcher started us
}

int num_threads() {
  return pool().size();
}

void set_num_threads(int n) {
  if (n <= 0) n = default_num_threads();
  std::lock_guard<std::mutex> lock(g_pool_mu);
  auto& p = pool_slot();
  if (p && p->size() == n) return;
  p.reset();
  p = std::make_unique<Pool>(n);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t n = end - begin;
  Pool& p = pool();
  int64_t chunks = std::min<int64_t>(p.size(), (n + grain - 1) / grain);
  if (chunks <= 1 || t_inside_parallel) {
    fn(begin, end);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  p.run(chunks, [&](int64_t c) {
    int64_t lo = begin + c * per;
    int64_t hi = std::min(end, lo + per);
    if (lo < hi) fn(lo, hi);
  });
}

}  // namespace cohort
