#include "cohort/data/loader.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace cohort::data {

// One pass over an epoch: the producer thread and the queue it fills.
struct Loader::Run {
  struct Item {
    Batch batch;
    std::exception_ptr error;  // set instead of batch when get_batch threw
  };

  Run(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices,
      const LoaderOptions& options, int64_t len, int64_t start, int64_t epoch);
  ~Run();
  void next();  // consumer: makes batch `next_` current, or sets done
  void produce(int64_t start);
  std::span<const int64_t> batch_indices(int64_t k) const;

  const std::shared_ptr<const Dataset> dataset;
  const std::vector<int64_t> indices;
  const int64_t batch;
  const int64_t len;
  const int64_t epoch;
  const int prefetch;
  const std::chrono::milliseconds timeout;

  // Consumer side, touched only by the thread iterating.
  int64_t next_index;
  int64_t current_index = -1;
  Batch current;
  bool done = false;

  // Shared with the producer; guarded by mu (the only lock).
  std::mutex mu;
  std::condition_variable ready;  // queue became non-empty
  std::condition_variable space;  // queue has room, or stop
  std::deque<Item> queue;
  std::atomic<bool> stop{false};
  std::thread thread;  // last member: starts after everything above is built
};

Loader::Run::Run(std::shared_ptr<const Dataset> dataset_in, std::vector<int64_t> indices_in,
                 const LoaderOptions& options, int64_t len_in, int64_t start, int64_t epoch_in)
    : dataset(std::move(dataset_in)),
      indices(std::move(indices_in)),
      batch(options.batch),
      len(len_in),
      epoch(epoch_in),
      prefetch(options.prefetch),
      timeout(options.timeout),
      next_index(start) {
  if (prefetch > 0 && start < len) thread = std::thread([this, start] { produce(start); });
}

Loader::Run::~Run() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  space.notify_all();
  if (thread.joinable()) thread.join();
}

std::span<const int64_t> Loader::Run::batch_indices(int64_t k) const {
  const int64_t lo = k * batch;
  const int64_t hi = std::min<int64_t>(lo + batch, int64_t(indices.size()));
  return std::span<const int64_t>(indices.data() + lo, size_t(hi - lo));
}

// The wait for room has no deadline on purpose: the consumer may legitimately spend minutes
// on one step. It cannot hang: ~Run sets stop and wakes it.
void Loader::Run::produce(int64_t start) {
  for (int64_t k = start; k < len && !stop; ++k) {
    Item item;
    try {
      item.batch = dataset->get_batch(batch_indices(k));
    } catch (...) {
      item.error = std::current_exception();
    }
    const bool failed = item.error != nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      space.wait(lock, [&] { return stop || int64_t(queue.size()) < prefetch; });
      if (stop) return;
      queue.push_back(std::move(item));
    }
    ready.notify_one();
    if (failed) return;
  }
}

void Loader::Run::next() {
  if (next_index >= len) {
    done = true;
    current = Batch{};
    return;
  }
  current_index = next_index++;
  if (prefetch == 0) {
    try {
      current = dataset->get_batch(batch_indices(current_index));
    } catch (...) {
      done = true;
      throw;
    }
    return;
  }
  Item item;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!ready.wait_for(lock, timeout, [&] { return !queue.empty(); })) {
      done = true;
      throw Timeout(detail::str("Loader: batch ", current_index, " of epoch ", epoch,
                                " not ready after ", timeout.count(),
                                " ms (is Dataset::get_batch stuck?)"));
    }
    item = std::move(queue.front());
    queue.pop_front();
  }
  space.notify_one();
  if (item.error) {
    done = true;
    std::rethrow_exception(item.error);
  }
  current = std::move(item.batch);
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      sampler_(options_.sampler.value_or(DistributedSampler(
          DistributedSampler::kSizeFromDataset, 0, 1,
          {.shuffle = options_.shuffle, .seed = options_.seed, .drop_last = false}))) {
  COHORT_CHECK_ARG(dataset_ != nullptr, "Loader: dataset is null");
  COHORT_CHECK_ARG(options_.batch >= 1, "Loader: batch ", options_.batch, " must be >= 1");
  COHORT_CHECK_ARG(options_.prefetch >= 0, "Loader: prefetch ", options_.prefetch, " must be >= 0");
  COHORT_CHECK_ARG(options_.timeout.count() > 0, "Loader: timeout ", options_.timeout.count(),
                   " ms must be > 0");
  sampler_.bind_size(dataset_->size());
}

Loader::~Loader() = default;
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;

void Loader::set_epoch(int64_t epoch) {
  sampler_.set_epoch(epoch);
}

void Loader::resume_at(int64_t batch) {
  COHORT_CHECK_ARG(batch >= 0 && batch <= len(), "Loader: resume_at(", batch,
                   ") is outside the epoch's ", len(), " batches");
  resume_at_ = batch;
}

int64_t Loader::len() const {
  const int64_t n = sampler_.num_samples();
  return options_.drop_last ? n / options_.batch : (n + options_.batch - 1) / options_.batch;
}

Loader::Iterator Loader::begin() {
  run_.reset();  // stops a pass still running before its queue goes away
  const int64_t start = resume_at_;
  resume_at_ = 0;
  run_ =
      std::make_unique<Run>(dataset_, sampler_.indices(), options_, len(), start, sampler_.epoch());
  run_->next();
  return Iterator(run_.get());
}

Batch& Loader::Iterator::operator*() const {
  COHORT_CHECK_ARG(run_ != nullptr && !run_->done, "Loader: dereferencing an ended iterator");
  return run_->current;
}

Loader::Iterator& Loader::Iterator::operator++() {
  COHORT_CHECK_ARG(run_ != nullptr && !run_->done, "Loader: incrementing an ended iterator");
  run_->next();
  return *this;
}

bool Loader::Iterator::operator==(End) const {
  return run_ == nullptr || run_->done;
}

int64_t Loader::Iterator::index() const {
  return run_ ? run_->current_index : -1;
}

}  // namespace cohort::data
