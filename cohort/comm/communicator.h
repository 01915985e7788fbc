#pragma once
// Communicator: a group of ranks that run collectives together (see collectives.h for the
// operations). It owns one transport::Context (a connection to every peer), the collective
// sequence number, a default deadline, and a worker thread for asynchronous operations.
//
// Rules a user relies on:
//   - every rank calls the same collectives in the same order (mismatches are detected at the
//     first message and fail with CollectiveMismatch naming both sides);
//   - one thread at a time issues operations on a communicator; asynchronous operations run in
//     issue order on the worker thread, and a synchronous one first waits for those;
//   - after an IoError or Timeout (a peer died or stalled) the communicator refuses further
//     operations: build a new one (as with NCCL/c10d, the stream state is unknown).
// No process-global state: several communicators may live in one process (tests run ranks as
// threads), each with its own store prefix.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cohort/comm/algorithms/exec.h"
#include "cohort/comm/cost_model.h"
#include "cohort/comm/flight_recorder.h"
#include "cohort/comm/shared_buffer.h"
#include "cohort/comm/topology.h"
#include "cohort/comm/transport/context.h"
#include "cohort/comm/work.h"
#include "cohort/core/error.h"

namespace cohort::rendezvous {
class Store;
}

namespace cohort::comm {

struct CommOptions {
  transport::DeviceOptions device;
  // Deadline of each operation (from when it starts running) unless the call passes its own.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Deadline for all ranks to arrive and connect.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(300);
  // Namespace of this communicator's keys in the store (sub-groups extend it). Communicators
  // created one after another under one prefix get distinct sub-namespaces automatically.
  std::string prefix = "comm";
  // Allreduce of buffers in the shared arenas (Communicator::alloc_shared) reads peers in place
  // from this many bytes (below, the rings' pipelining is faster). Same on every rank.
  size_t shared_buffers_min_bytes = size_t{256} << 10;
  // Pipelining granularity of ring and chain algorithms.
  size_t chunk_bytes = size_t{256} << 10;
  // Algorithm::kAuto for broadcast and reduce: binomial trees up to this many bytes, ring or
  // chain above. (Allreduce asks the cost model.)
  size_t small_message_bytes = size_t{64} << 10;
  // The allreduce cost model; unset: CostModel::tcp() if any peer is reached over TCP, else
  // CostModel::shared_memory(). Must be the same on every rank.
  std::optional<CostModel> cost_model;
  // This rank's host for hierarchical algorithms (topology.h); empty: default_host_id(). Tests
  // give ranks of one machine different ids to play several hosts. Sub-groups inherit it.
  std::string host_id;
  // Fault injection (tests: latency, stalls, lost connections) is device.faults.
  // The flight recorder (flight_recorder.h): how many of the last operations it keeps, and
  // where this rank writes them when an operation fails or times out (empty: nowhere).
  // Sub-groups keep a ring of their own but do not write it (their file would clobber this one).
  size_t flight_recorder_size = 64;
  std::string flight_dump_path;
};

class Communicator {
 public:
  // Connects to every peer through the store. Collective over all `size` ranks.
  static std::shared_ptr<Communicator> create(std::shared_ptr<rendezvous::Store> store, int rank,
                                              int size, CommOptions options = {});
  ~Communicator();  // waits for queued asynchronous operations, then closes the connections
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommOptions& options() const { return options_; }
  // "shm", "tcp" or "self": how this rank reaches `peer`.
  const char* transport_of(int peer) const { return ctx_->pair_kind(peer); }

  // Sub-groups. Every rank of this communicator calls them in the same order (like
  // torch.distributed.new_group); they return nullptr on ranks outside the new group.
  // new_group: the listed ranks, in that order (rank i of the group is ranks[i]).
  std::shared_ptr<Communicator> new_group(const std::vector<int>& ranks);
  // split: one group per colour (colour < 0: none), ordered by (key, rank). Collective.
  std::shared_ptr<Communicator> split(int color, int key);

  // Payload bytes this rank has sent to / received from its peers (all operations so far).
  uint64_t bytes_sent() const { return ctx_->bytes_sent(); }
  uint64_t bytes_received() const { return ctx_->bytes_received(); }
  // Of those, the bytes that travelled in messages (not read through shared arenas).
  uint64_t message_bytes_received() const { return ctx_->message_bytes_received(); }
  // Of those, the bytes read straight from shm peers' memory
  // (DeviceOptions::shm_single_copy_bytes).
  uint64_t single_copy_bytes_received() const { return ctx_->single_copy_bytes_received(); }

  // `bytes` from this rank's shared arena (shared_buffer.h); an empty SharedBuffer when there
  // is none (a peer on another host, or DeviceOptions::shm_arena_bytes == 0). IoError when the
  // arena or /dev/shm is full. Not collective: ranks allocate independently.
  SharedBuffer alloc_shared(size_t bytes);
  bool has_shared_arena() const;
  // Whether [p, p + bytes) lies in this rank's shared arena.
  bool in_shared_arena(const void* p, size_t bytes) const;

  // Closes every connection now (tests use it to play a peer that goes away).
  void close();
  // From any thread: the operation in flight and every later one, here and in the sub-groups
  // made from this communicator, fail with an IoError quoting `reason` (the liveness watchdog
  // names a peer that stopped beating this way, comm/liveness.h). The communicator is then
  // broken, as after any IoError.
  void abort(const std::string& reason);

  // What Algorithm::kAuto consults for allreduce (see cost_model.h). set_cost_model must be
  // called with the same model on every rank (measure_cost_model does that).
  const CostModel& cost_model() const { return cost_model_; }
  void set_cost_model(const CostModel& model) { cost_model_ = model; }
  // Which ranks share a host (from every rank's CommOptions::host_id). Same on every rank.
  const HostTopology& topology() const { return topology_; }
  // The last operations (options().flight_recorder_size of them).
  const FlightRecorder& flight_recorder() const { return flight_; }

  // --- used by the operations in collectives.cc and p2p.cc ---
  struct Op {
    Signature sig;
    std::chrono::milliseconds timeout{0};  // 0: options().timeout
    std::function<void(Exec&)> body;
    uint64_t seq = 0;  // collectives: assigned on issue; p2p: set by the caller
    bool p2p = false;
    // For the flight recorder: the p2p call's name ("send", "recv", "send_recv") and peer.
    const char* p2p_name = nullptr;
    int peer = -1;
    uint64_t flight_id = 0;  // set on issue
  };
  void run(Op op);
  Work submit(Op op);
  // Calls `issue` (which issues one asynchronous collective on this communicator) and, when
  // no earlier operation is queued or running, runs that collective on this thread before
  // returning: its Work is then done. Otherwise it is queued as usual. For a caller about to
  // wait for the result anyway (the torch plugin's wait() on a collective it held back): it
  // saves the hand-off to the worker thread and back, two thread wake-ups that are most of a
  // small collective's cost when a rank's threads share one core. Point-to-point operations
  // are always queued; so is an operation issued while the worker is still finishing the one
  // before (it completes that Work, then releases the communicator).
  Work issue_inline(const std::function<Work()>& issue);
  // p2p message counters per peer (send/recv are matched per pair, not collectively).
  uint64_t next_p2p_seq(int peer, bool send);

 private:
  Communicator(std::shared_ptr<rendezvous::Store> store, int rank, int size, CommOptions options);
  void assign_seq(Op& op);
  void execute(Op& op);
  // Rethrows the error in flight with the operation, rank (and for a mismatch both sides' calls)
  // in front, keeping its type, and marks the communicator broken.
  [[noreturn]] void fail_op(const Op& op);
  std::string op_name(const Op& op) const;
  // Marks the operation failed in the flight recorder and writes the ring where the options
  // say; returns what to append to the error (where the record went).
  std::string record_failure(const Op& op, const std::string& error);
  void worker_loop();
  // Runs an operation this thread has claimed (busy_ set), then releases the claim; returns
  // its error.
  std::exception_ptr run_claimed(Op& op);

  std::shared_ptr<rendezvous::Store> store_;
  int rank_;
  int size_;
  CommOptions options_;
  std::string prefix_;  // this communicator's store namespace: "<options.prefix>/<incarnation>"
  std::unique_ptr<transport::Context> ctx_;
  std::vector<std::vector<char>> scratch_{2};
  CostModel cost_model_;
  HostTopology topology_;
  FlightRecorder flight_;
  uint64_t next_seq_ = 0;
  uint64_t next_group_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_received_;
  std::string broken_;  // the first transport error; non-empty: refuse further operations
  // Sub-groups made by new_group and split, which abort() reaches too (under mu_).
  std::vector<std::weak_ptr<Communicator>> children_;
  std::shared_ptr<Communicator> adopt(std::shared_ptr<Communicator> child);
  // Asynchronous operations sleep between polls unless someone waits for them (backoff.h).
  std::shared_ptr<transport::WaitHint> wait_hint_ = std::make_shared<transport::WaitHint>();

  // Lock order: mu_ only (never held while an operation runs).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Op, Work>> queue_;
  bool busy_ = false;         // an operation is running (on the worker or a synchronous caller)
  bool inline_next_ = false;  // issue_inline: the next submit may run on the caller
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace cohort::comm
