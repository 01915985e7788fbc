#pragma once
// Loader: batches from a Dataset in the order a sampler gives, assembled ahead of the consumer
// by a background thread (torch.utils.data.DataLoader with one worker and pin-free prefetch).
//
//   Loader loader(FashionMNIST::train(), {.batch = 64, .shuffle = true, .seed = 1});
//   for (int64_t e = 0; e < epochs; ++e) {
//     loader.set_epoch(e);
//     for (auto& [x, y] : loader) { ... }
//   }
//
// Threading: begin() starts one producer thread for the pass; it calls Dataset::get_batch for
// batches k, k+1, ... and pushes them into a queue of at most `prefetch` batches. The consumer
// pops in order. A producer exception is delivered, in order, at the batch that failed.
// Destroying the loader (or starting a new pass) mid-epoch stops the producer: it wakes on the
// stop flag, and is joined after its current get_batch returns.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "cohort/data/dataset.h"
#include "cohort/data/sampler.h"

namespace cohort::data {

struct LoaderOptions {
  int64_t batch = 1;
  // Which indices this process visits (a DistributedSampler for data parallelism). Without
  // one, every index in order, or shuffled per epoch with `seed` when `shuffle`.
  std::optional<DistributedSampler> sampler = std::nullopt;
  bool shuffle = false;
  uint64_t seed = 0;
  // Drop the last batch of an epoch when it has fewer than `batch` samples.
  bool drop_last = false;
  // Batches assembled ahead by the background thread; 0 assembles on the caller's thread.
  int prefetch = 2;
  // How long the consumer waits for one batch before throwing Timeout.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

class Loader {
  struct Run;

 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  template <typename D, typename = std::enable_if_t<std::is_base_of_v<Dataset, D>>>
  Loader(D dataset, LoaderOptions options)
      : Loader(std::shared_ptr<const Dataset>(std::make_shared<D>(std::move(dataset))),
               std::move(options)) {}
  ~Loader();
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;

  // The epoch whose order the next pass follows (reshuffles, like DistributedSampler).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return sampler_.epoch(); }
  // The next pass starts at batch `batch` of the epoch instead of 0 (resuming from a
  // checkpoint taken after `batch` batches); later passes start at 0 again.
  void resume_at(int64_t batch);
  // Batches per epoch for this process.
  int64_t len() const;
  const DistributedSampler& sampler() const { return sampler_; }
  const Dataset& dataset() const { return *dataset_; }

  struct End {};
  class Iterator {
   public:
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    bool operator==(End) const;
    // Index within the epoch of the batch operator* returns.
    int64_t index() const;

   private:
    friend class Loader;
    explicit Iterator(Run* run) : run_(run) {}
    Run* run_;
  };
  // Starts a pass (stopping any pass still running) and fetches its first batch.
  Iterator begin();
  End end() const { return {}; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  DistributedSampler sampler_;
  int64_t resume_at_ = 0;
  std::unique_ptr<Run> run_;
};

}  // namespace cohort::data
