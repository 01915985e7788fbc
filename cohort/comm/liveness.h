#pragma once
// Liveness (docs/elastic.md): every rank of a job beats into the store, and a watchdog on every
// rank names a peer whose beat has not moved for `detect`: a process that died, was stopped
// (SIGSTOP, a debugger) or was cut off from the store. The collectives in flight then fail at
// once with an error naming it (Communicator::abort), not at their deadline (comm.timeout_s).
//
//   beat:  "<prefix>/beat/<rank>" += 1 every `interval`            (one store add)
//   watch: read every peer's counter every `interval`; a counter unchanged for `detect`, or
//          a store that cannot be reached for `detect`, is a lost peer (reported once)
//
// A death is usually seen sooner by the transports (a closed connection fails the collective at
// once); the beat is what catches a stall or a cut link, which close nothing. One thread per rank.
// The watchdog's store calls must fail within about `detect` for a cut link to be named in time:
// give it a store connection of its own with a deadline of that order (train/world.cc does).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cohort::rendezvous {
class Store;
}

namespace cohort::comm {

class Communicator;

struct LivenessOptions {
  std::chrono::milliseconds detect{2000};  // a beat unchanged this long: the peer is lost
  std::chrono::milliseconds interval{0};   // between beats and looks; 0: detect / 8
  std::string prefix = "liveness";         // store namespace (a job's generation may add to it)
  // Names the setting in the error ("elastic.detect_s = 2").
  std::string setting = "elastic.detect_s";
  // When this key appears in the store (elastic recovery: a survivor opened a membership round,
  // train/elastic.h), on_lost runs with its value as the reason, so that every survivor leaves
  // its collective within one look instead of at detection. Empty: none.
  std::string round_key;
};

// What the watchdog found: the peer (or -1 for the store itself) and the error text.
struct LostPeer {
  int rank = -1;
  std::string reason;
  bool store_unreachable = false;  // the store itself did not answer for `detect`
};

class Liveness {
 public:
  // Starts beating as `rank` of `size` and watching the others. `on_lost` runs once, on the
  // watchdog's thread, when a peer is lost (after which the watchdog only beats).
  Liveness(std::shared_ptr<rendezvous::Store> store, int rank, int size, LivenessOptions options,
           std::function<void(const LostPeer&)> on_lost);
  ~Liveness();  // stops the thread
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // The lost peer, if one was found (rank -1 and an empty reason otherwise).
  LostPeer lost() const;

 private:
  void run();
  void look(std::chrono::steady_clock::time_point now);
  void report(int rank, const std::string& why, bool store_unreachable = false);

  std::shared_ptr<rendezvous::Store> store_;
  int rank_, size_;
  LivenessOptions options_;
  std::function<void(const LostPeer&)> on_lost_;
  // Per peer: the last counter seen and when it last moved.
  std::vector<int64_t> seen_;
  std::vector<std::chrono::steady_clock::time_point> moved_;
  std::chrono::steady_clock::time_point store_ok_;
  mutable std::mutex mu_;  // guards lost_ and stop_
  std::condition_variable cv_;
  LostPeer lost_;
  bool stop_ = false;
  std::thread thread_;
};

// Aborts `comm` when a peer is lost: the on_lost of a Liveness that guards a communicator.
std::function<void(const LostPeer&)> abort_on_loss(std::weak_ptr<Communicator> comm);

}  // namespace cohort::comm
