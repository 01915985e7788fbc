#pragma once
// Context: one communicator's connections, one Pair per peer (see transport.h).
//
// Connection protocol (every rank of the context runs it at once, through the Store):
//   1. publish "<prefix>/info/<rank>": host identity, pid, TCP address (port chosen by the OS);
//   2. read every peer's info; pick shm for peers with the same host identity (kAuto), else tcp;
//   3. shm: the lower rank creates the segment and publishes its name, the higher rank maps it,
//      unlinks it and acknowledges; tcp: the higher rank connects to the lower rank's listener,
//      both prove the job secret (net/auth.h) and the connector names its rank.
// Creation throws Timeout naming the ranks that did not arrive within connect_timeout.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cohort/comm/transport/backoff.h"
#include "cohort/comm/transport/transport.h"

namespace cohort::comm::transport {

class ShmArena;

class TcpEndpoint;

class Context {
 public:
  static std::unique_ptr<Context> create(const Device& device, rendezvous::Store& store, int rank,
                                         int size, const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks of this context on this host (this one included); sizes the spin budget.
  int local_ranks() const { return local_ranks_; }
  // "shm" / "tcp" / "self".
  const char* pair_kind(int peer) const;

  Request send(int peer, const void* data, size_t bytes, const Header& header);
  // With reduce set, incoming elements are folded into data (see RecvReduce).
  Request recv(int peer, void* data, size_t bytes, const Header& header,
               const RecvReduce* reduce = nullptr);

  // Drives caller-driven pairs until op finishes; rethrows its error; Timeout past deadline
  // (after breaking the op's pair).
  void wait(OpState& op, Deadline deadline);
  // One progress step; true if op has finished.
  bool test(OpState& op);
  // Waits for every request (all are driven together, so no send can starve a recv).
  void wait_all(std::vector<Request>& requests, Deadline deadline);

  // For a waiter with nothing to do in the background: sleeps until `peer` publishes progress
  // on its pair, this context's notifier moves past `seen` (notifier_generation(), read before
  // the last poll) or `until`; true. False at once where the pair has no doorbell (tcp): then
  // the caller sleeps in timed steps (Backoff::pause_background).
  bool sleep_until_peer(int peer, Deadline until, uint64_t seen);
  uint64_t notifier_generation() const { return notifier_->generation(); }
  // Whether `peer` is known to have left this context (Pair::peer_left).
  bool peer_left(int peer) const {
    return pairs_[size_t(peer)] && pairs_[size_t(peer)]->peer_left();
  }

  // How waits poll (see WaitHint); null: always hard.
  // Set before the first operation. The hint's waiters ring this context's notifier.
  void set_wait_hint(std::shared_ptr<WaitHint> hint) {
    hint->wake = notifier_;
    hint_ = std::move(hint);
  }

  // Payload bytes that moved to and from peers so far, for per-step traffic metrics: posted
  // in messages (frame headers excluded) plus what moved through shared arenas without one
  // (count_shared_traffic). Readable from any thread.
  uint64_t bytes_sent() const { return message_bytes_sent() + shared_sent_.load(kRelaxed); }
  uint64_t bytes_received() const {
    return message_bytes_received() + shared_received_.load(kRelaxed);
  }
  // Of those, the bytes posted in messages only.
  uint64_t message_bytes_sent() const { return bytes_sent_.load(kRelaxed); }
  uint64_t message_bytes_received() const { return bytes_received_.load(kRelaxed); }
  // Adds traffic that took no message: bytes read from peers' shared arenas (received) and
  // bytes of ours that peers read (sent).
  void count_shared_traffic(uint64_t received, uint64_t sent) {
    shared_received_.fetch_add(received, kRelaxed);
    shared_sent_.fetch_add(sent, kRelaxed);
  }
  // Of those received, the bytes read straight from a shm peer's memory (single copy).
  uint64_t single_copy_bytes_received() const {
    return single_copy_bytes_.load(std::memory_order_relaxed);
  }

  // The shared arenas (shm/shm_arena.h): this rank's, and each peer's as mapped here. Null
  // unless every peer is on this host and DeviceOptions::shm_arena_bytes > 0.
  const std::shared_ptr<ShmArena>& arena() const { return arena_; }
  const ShmArena* peer_arena(int rank) const { return peer_arenas_[size_t(rank)].get(); }

  // Closes every pair: peers' pending and later ops fail with IoError naming this rank.
  void close();
  // Breaks every pair after an error: peers' ops fail at once with an IoError quoting `reason`.
  void abort(const std::string& reason);
  // From any thread (a liveness watchdog, comm/liveness.h): every wait of this context, the one
  // in progress and later ones, fails with an IoError quoting `reason`. The waiting thread
  // breaks the pairs itself (abort above), since a pair is driven by one thread at a time; a
  // sleeping waiter is woken.
  void request_abort(const std::string& reason);
  bool abort_requested() const { return abort_requested_.load(std::memory_order_acquire); }

 private:
  Context(int rank, int size);
  Pair& pair_for(int peer, const char* op);
  bool progress_all();
  [[noreturn]] void throw_timeout(OpState& op, Deadline deadline);
  // Applies FaultInjection to a send about to be posted on p.
  void inject_faults(Pair& p, const OpState& op);
  // Connection setup (connect.cc).
  struct Plan {
    std::vector<int> shm_peers, tcp_lower, tcp_higher;
    std::vector<std::string> tcp_address;  // by rank
  };
  void connect(const Device& device, rendezvous::Store& store, const ContextOptions& options);
  Plan plan_peers(const DeviceOptions& dev, rendezvous::Store& store, const std::string& prefix,
                  Deadline deadline);
  void connect_arenas(const DeviceOptions& dev, rendezvous::Store& store, const std::string& prefix,
                      Deadline deadline);
  void connect_pairs(const Plan& plan, const DeviceOptions& dev, rendezvous::Store& store,
                     const std::string& prefix, Deadline deadline);

  int rank_;
  int size_;
  int local_ranks_ = 1;
  bool own_core_ = false;  // pinned to a CPU no other local rank is pinned to (backoff.h)
  std::vector<std::unique_ptr<Pair>> pairs_;  // indexed by rank; null for this rank
  std::vector<Pair*> polled_;                 // caller-driven pairs
  std::shared_ptr<ShmArena> arena_;
  std::vector<std::shared_ptr<ShmArena>> peer_arenas_;  // by rank; null for this rank
  std::unique_ptr<TcpEndpoint> tcp_;  // listener and event loop, if any pair is tcp
  // Rung by the tcp event loop on completion, and by a thread that starts to wait on the
  // result of a background operation (WaitHint::add_waiter).
  std::shared_ptr<Notifier> notifier_ = std::make_shared<Notifier>();
  Backoff::Policy backoff_policy_;
  AdaptiveSpin spin_;
  // request_abort: the flag is read by every wait; the reason under abort_mu_ (written once).
  void abort_if_requested();
  std::atomic<bool> abort_requested_{false};
  bool aborted_ = false;  // by the waiting thread: the pairs are broken
  std::mutex abort_mu_;
  std::string abort_reason_;
  FaultInjection faults_;
  uint64_t sent_to_drop_peer_ = 0;
  bool stalled_ = false;
  static constexpr auto kRelaxed = std::memory_order_relaxed;
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, single_copy_bytes_{0};
  std::atomic<uint64_t> shared_sent_{0}, shared_received_{0};
  std::shared_ptr<const WaitHint> hint_;
};

}  // namespace cohort::comm::transport
