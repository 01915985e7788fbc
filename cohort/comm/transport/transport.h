#pragma once
// The transport interface (DESIGN convention 1, after gloo/transport): four nouns.
//
//   Device   what a process brings to the network: which transports (shm, tcp, auto), the
//            address TCP binds, the job secret. Cheap; one per process or per communicator.
//   Context  one per communicator: this rank, the world size, and one Pair per peer, all
//            connected through the Store at creation (addresses published there; TCP ports come
//            from the OS). Context::wait drives the caller-driven transports (shm).
//   Pair     a full-duplex connection to one peer. Messages on a pair are matched in order:
//            the n-th recv posted for a peer receives the n-th message that peer sent to us,
//            and its Header and length must equal what the receiver expects.
//   Request  the handle of one posted send or recv (gloo's "Buffer" role): done(), wait().
//
// Everything is non-blocking until wait(). A wait past its deadline throws cohort::Timeout
// naming the peer, the op and its sequence number on the pair, and leaves the pair broken
// (the stream position is unknown): rebuild the communicator. A dead peer throws IoError.
//
// Threading: a Context and its Pairs are used by one thread at a time (the communicator
// serialises its operations). Transports with their own thread (tcp) lock internally.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/types.h"
#include "cohort/core/error.h"
#include "cohort/net/secret.h"

namespace cohort::rendezvous {
class Store;
}

namespace cohort::comm::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using Millis = std::chrono::milliseconds;

// 32 bytes that travel with every message and are compared on receipt. The comm layer puts
// the collective's sequence number, op, dtype and count here, which makes mismatched
// collectives fail at the first message instead of hanging.
struct Header {
  uint64_t tag = 0;
  uint64_t info[3] = {0, 0, 0};
  bool operator==(const Header&) const = default;
};

// An arriving message whose Header or length differs from the posted recv's. The pair is
// broken afterwards. The comm layer turns it into a message naming both collectives.
class Mismatch : public IoError {
 public:
  Mismatch(const std::string& message, int peer, Header expected, uint64_t expected_bytes,
           Header got, uint64_t got_bytes)
      : IoError(message),
        peer(peer),
        expected(expected),
        got(got),
        expected_bytes(expected_bytes),
        got_bytes(got_bytes) {}
  int peer;
  Header expected, got;
  uint64_t expected_bytes, got_bytes;
};

// A recv that folds the incoming elements into its buffer instead of copying:
// buf[i] = incoming[i] op buf[i] (incoming is the left operand; see reduce.h).
struct RecvReduce {
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
};

enum class OpKind : uint8_t { kSend, kRecv };

// One posted send or recv, shared by the Request and the transport. Fields above `status`
// are written when posted and only read afterwards; the progress fields belong to the
// transport (its thread, or the waiting thread for caller-driven ones).
struct OpState {
  OpKind kind = OpKind::kSend;
  int peer = -1;
  uint64_t seq = 0;  // per pair and direction: the n-th send (or recv) to/from this peer
  Header header;
  char* data = nullptr;
  size_t bytes = 0;
  bool reduce = false;
  RecvReduce reduce_spec;
  // Progress, owned by the transport.
  size_t done_bytes = 0;
  bool header_done = false;
  // Single-copy transfer (shm/single_copy.h): the peer reads the payload straight from
  // `data` (send) or from `remote` in the sender's process (recv); `single_copy_index` is
  // the n-th such message on the pair, which the receiver acknowledges.
  bool single_copy = false;
  uint64_t remote = 0;
  uint64_t single_copy_index = 0;
  // 0 pending, 1 done, 2 failed (error set before the release store).
  std::atomic<int> status{0};
  std::exception_ptr error;

  bool finished() const { return status.load(std::memory_order_acquire) != 0; }
  // "recv #3 from rank 2" / "send #0 to rank 1".
  std::string describe() const;
};

// The message of an exception_ptr ("unknown error" for non-std exceptions).
std::string what_of(const std::exception_ptr& e);

class Context;
class Notifier;  // backoff.h

class Request {
 public:
  Request() = default;
  Request(std::shared_ptr<OpState> op, Context* ctx) : op_(std::move(op)), ctx_(ctx) {}
  bool valid() const { return op_ != nullptr; }
  // True once the op completed or failed. Drives caller-driven transports one step.
  bool done();
  // Blocks until done; rethrows the op's error; Timeout past the deadline.
  void wait(Deadline deadline);
  const OpState& state() const { return *op_; }

 private:
  std::shared_ptr<OpState> op_;
  Context* ctx_ = nullptr;
};

class Pair {
 public:
  explicit Pair(int peer) : peer_(peer) {}
  virtual ~Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int peer() const { return peer_; }
  virtual const char* kind() const = 0;  // "shm", "tcp"
  // Queues a send or recv behind the ones already posted in that direction.
  virtual void post(const std::shared_ptr<OpState>& op) = 0;
  // Caller-driven transports move data here; returns true if anything moved. Others: false.
  virtual bool progress() = 0;
  virtual bool caller_driven() const = 0;
  // Fails every pending op with `why` and refuses new ones: the stream position is unknown.
  // The peer is told at once, with why's message, so its ops fail with an IoError quoting it
  // instead of waiting for their deadline.
  virtual void abort(std::exception_ptr why) = 0;
  // Orderly close: the peer's pending and later ops fail with IoError naming this rank.
  virtual void close() = 0;
  // For a waiter with nothing to do in the background: sleeps until the peer publishes
  // progress on this pair, `local` rings (Notifier::notify; its generation moved from `seen`)
  // or `until`, and returns true; or returns false at once where the pair cannot (then the
  // caller sleeps in timed steps). May make progress itself first.
  virtual bool sleep_until_peer(Clock::time_point until, Notifier* local, uint64_t seen) {
    return false;
  }
  // Whether the peer is known to have left: it closed or broke the pair (its call failed), or
  // this side broke it. False where the pair cannot tell without a message (tcp).
  virtual bool peer_left() const { return false; }

 protected:
  // Completes or fails an op (the release store publishes its error).
  static void finish(OpState& op) { op.status.store(1, std::memory_order_release); }
  static void fail(OpState& op, std::exception_ptr e);

 private:
  int peer_;
};

enum class TransportKind : uint8_t {
  kAuto,  // shared memory to peers on this host, TCP to the others
  kShm,   // shared memory only (every peer must be on this host)
  kTcp,   // TCP only (also between ranks of one host)
};
const char* transport_name(TransportKind kind);

// Fault injection for tests (DESIGN convention 9, in the spirit of ps-lite's PS_DROP_MSG):
// latency, stalls and lost connections without netem or root. Everything is off by default
// and applies only to messages this rank sends; the options are plain values, so a test gives
// each rank its own (no environment variables).
struct FaultInjection {
  // Every send waits this long before it is posted (the caller's thread sleeps).
  Millis delay{0};
  // Rank stall_rank sleeps stall_for before posting its first message whose header tag (the
  // comm layer's collective sequence number) is >= stall_before_tag: the rank freezes just
  // before that collective, as a process stuck in a long GC pause or a debugger would. Once.
  int stall_rank = -1;
  uint64_t stall_before_tag = 0;
  Millis stall_for{std::chrono::seconds(5)};
  // Rank drop_rank breaks its connection to drop_peer instead of sending its message number
  // drop_after (0-based) to it: that send and later ops on the pair fail with IoError, and the
  // peer's ops fail with an IoError naming this rank, as when a link goes down.
  int drop_rank = -1;
  int drop_peer = -1;
  uint64_t drop_after = 0;
  // Act as if the kernel refused single-copy reads of peers' memory (shm/single_copy.h), as it
  // does under Yama's ptrace_scope >= 1: every shm message goes through the rings.
  bool deny_single_copy = false;
};

struct DeviceOptions {
  TransportKind transport = TransportKind::kAuto;
  // Address the TCP listener binds; loopback unless told otherwise. Peers connect to it, so
  // multi-host jobs pass this host's address (or "0.0.0.0" plus advertise_address).
  std::string bind_address = "127.0.0.1";
  // Address published to peers; empty: bind_address.
  std::string advertise_address;
  // Bytes of each shared-memory ring (one per direction and peer). Power of two, >= 64 KiB.
  size_t shm_ring_bytes = size_t{1} << 20;
  // Shared-memory messages of at least this many bytes are read by the receiver straight from
  // the sender's memory (one copy, shm/single_copy.h) where the kernel allows it; smaller ones,
  // and all of them where it does not, go through the rings. 0 (the default) disables single
  // copy: on the machines measured so far the kernel's copy (~6 GB/s) is half as fast as the
  // ring's memcpy, so the rings win at every size (docs/benchmarks.md, "single copy").
  size_t shm_single_copy_bytes = 0;
  // Virtual size of each rank's shared arena (shm/shm_arena.h), made when every peer is on
  // this host: buffers allocated from it (Communicator::alloc_shared) are reduced in place by
  // peers. Pages are reserved only as buffers are allocated. 0: no arena.
  size_t shm_arena_bytes = size_t{1} << 30;
  // TCP socket buffer sizes (SO_SNDBUF / SO_RCVBUF).
  int tcp_socket_buffer = 4 << 20;
  // The per-job secret every TCP data connection proves it knows (net/auth.h). Empty
  // means insecure, which is refused unless the listener binds a loopback address.
  net::Secret secret;
  // Test hooks; see FaultInjection.
  FaultInjection faults;
};

// Process-level transport configuration; contexts made from one Device share its options.
class Device {
 public:
  explicit Device(DeviceOptions options = {});
  const DeviceOptions& options() const { return options_; }

 private:
  DeviceOptions options_;
};

struct ContextOptions {
  // Deadline for connecting every pair (all ranks must arrive within it).
  Millis connect_timeout = std::chrono::seconds(60);
  // Namespace of this context's keys in the store; distinct communicators on one store need
  // distinct prefixes.
  std::string prefix = "comm";
};

}  // namespace cohort::comm::transport
