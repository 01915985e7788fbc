#include "cohort/comm/liveness.h"

#include <cstdio>

#include "cohort/comm/communicator.h"
#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/rendezvous/store.h"

namespace cohort::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string beat_key(const std::string& prefix, int rank) {
  return detail::str(prefix, "/beat/", rank);
}

// "2.0": tenths are what a reader of the error needs.
std::string seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

Liveness::Liveness(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                   LivenessOptions options, std::function<void(const LostPeer&)> on_lost)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      options_(std::move(options)),
      on_lost_(std::move(on_lost)),
      seen_(size_t(size), -1),
      moved_(size_t(size), Clock::now()),
      store_ok_(Clock::now()) {
  COHORT_CHECK_ARG(options_.detect.count() > 0, "Liveness: detect must be positive");
  if (options_.interval.count() <= 0)
    options_.interval = std::max(std::chrono::milliseconds(1), options_.detect / 8);
  store_->add(beat_key(options_.prefix, rank_), 1);  // alive from the start
  thread_ = std::thread([this] { run(); });
}

Liveness::~Liveness() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

LostPeer Liveness::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

void Liveness::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const bool watching = lost_.rank == -1 && lost_.reason.empty();
    lock.unlock();
    const Clock::time_point now = Clock::now();
    try {
      store_->add(beat_key(options_.prefix, rank_), 1);
      if (watching) look(now);
      store_ok_ = now;
    } catch (const std::exception& e) {
      // The store is out of reach (its host died, the link is cut): after `detect` this rank
      // cannot tell the living from the dead, so it stops as if every peer were lost.
      const Clock::time_point failed = Clock::now();  // the call itself may have waited
      if (watching && failed - store_ok_ >= options_.detect)
        report(-1,
               detail::str("the store (", store_->describe(), ") has not answered for ",
                           seconds(failed - store_ok_), " s: ", e.what()),
               /*store_unreachable=*/true);
    }
    lock.lock();
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
  }
}

void Liveness::look(Clock::time_point now) {
  if (!options_.round_key.empty() && store_->check({options_.round_key})) {
    report(-1, store_->get_string(options_.round_key));
    return;
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const std::string key = beat_key(options_.prefix, p);
    const int64_t count = store_->check({key}) ? std::stoll(store_->get_string(key)) : 0;
    if (count != seen_[size_t(p)]) {
      seen_[size_t(p)] = count;
      moved_[size_t(p)] = now;
      continue;
    }
    if (now - moved_[size_t(p)] < options_.detect) continue;
    report(p, detail::str("rank ", p, " sent no heartbeat for ", seconds(now - moved_[size_t(p)]),
                          " s (", options_.setting, " = ", seconds(options_.detect),
                          "): it died, was stopped (SIGSTOP, a debugger) or was cut off"));
    return;
  }
}

void Liveness::report(int rank, const std::string& why, bool store_unreachable) {
  LostPeer lost{rank, why, store_unreachable};
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_ = lost;
  }
  log::warn("elastic", "rank ", rank_, ": ", why);
  if (on_lost_) on_lost_(lost);
}

std::function<void(const LostPeer&)> abort_on_loss(std::weak_ptr<Communicator> comm) {
  return [comm](const LostPeer& lost) {
    if (auto c = comm.lock()) c->abort(lost.reason);
  };
}

}  // namespace cohort::comm
