#include "cohort/comm/transport/context.h"

#include <thread>

#include "cohort/comm/transport/shm/shm_arena.h"
#include "cohort/comm/transport/tcp/tcp_endpoint.h"

namespace cohort::comm::transport {
namespace {

// The longest a background waiter sleeps on a doorbell before it polls again.
constexpr auto kLongestBackgroundSleep = std::chrono::milliseconds(1);

}  // namespace

Context::Context(int rank, int size) : rank_(rank), size_(size) {}

Context::~Context() {
  if (tcp_) tcp_->stop();  // the loop thread must not touch pairs being destroyed
  close();
}

const char* Context::pair_kind(int peer) const {
  COHORT_CHECK_ARG(peer >= 0 && peer < size_, "transport: rank ", peer, " is not in [0, ", size_,
                   ")");
  return pairs_[size_t(peer)] ? pairs_[size_t(peer)]->kind() : "self";
}

Pair& Context::pair_for(int peer, const char* op) {
  COHORT_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "transport: ", op, " to rank ", peer,
                   " from rank ", rank_, ": the peer must be another rank in [0, ", size_, ")");
  return *pairs_[size_t(peer)];
}

Request Context::send(int peer, const void* data, size_t bytes, const Header& header) {
  Pair& p = pair_for(peer, "send");
  auto op = std::make_shared<OpState>();
  op->kind = OpKind::kSend;
  op->header = header;
  op->data = static_cast<char*>(const_cast<void*>(data));
  op->bytes = bytes;
  inject_faults(p, *op);
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  p.post(op);
  return Request(std::move(op), this);
}

void Context::inject_faults(Pair& p, const OpState& op) {
  const FaultInjection& f = faults_;
  if (f.delay.count() > 0) std::this_thread::sleep_for(f.delay);
  if (f.stall_rank == rank_ && !stalled_ && op.header.tag >= f.stall_before_tag) {
    stalled_ = true;
    std::this_thread::sleep_for(f.stall_for);
  }
  if (f.drop_rank == rank_ && f.drop_peer == p.peer() && sent_to_drop_peer_++ == f.drop_after) {
    auto why = std::make_exception_ptr(
        IoError(detail::str("fault injection: rank ", rank_, " dropped its connection to rank ",
                            p.peer(), " after ", f.drop_after, " messages")));
    p.abort(why);  // the send is posted next and fails with `why`, like everything after it
  }
}

Request Context::recv(int peer, void* data, size_t bytes, const Header& header,
                      const RecvReduce* reduce) {
  Pair& p = pair_for(peer, "recv");
  auto op = std::make_shared<OpState>();
  op->kind = OpKind::kRecv;
  op->header = header;
  op->data = static_cast<char*>(data);
  op->bytes = bytes;
  if (reduce) {
    size_t esz = dtype_size(reduce->dtype);
    check_reduce_op(reduce->op, "transport recv");
    COHORT_CHECK_ARG(bytes % esz == 0, "transport: reducing recv of ", bytes,
                     " bytes is not a whole number of ", dtype_short_name(reduce->dtype),
                     " elements");
    op->reduce = true;
    op->reduce_spec = *reduce;
  }
  bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  p.post(op);
  return Request(std::move(op), this);
}

bool Context::progress_all() {
  bool moved = false;
  for (Pair* p : polled_) moved |= p->progress();
  return moved;
}

bool Context::test(OpState& op) {
  if (abort_requested()) abort_if_requested();
  if (!op.finished()) progress_all();
  return op.finished();
}

void Context::wait(OpState& op, Deadline deadline) {
  Backoff::Policy policy = backoff_policy_;
  policy.spin = spin_.now();
  Backoff backoff(policy);
  struct Adapt {  // on every exit, including throws
    AdaptiveSpin& spin;
    Backoff& backoff;
    ~Adapt() { spin.update(backoff.paused(), backoff.gave_up_spinning()); }
  } adapt{spin_, backoff};
  for (;;) {
    uint64_t seen = notifier_->generation();
    bool moved = progress_all();
    if (abort_requested()) abort_if_requested();  // fails op (its pair is broken)
    int status = op.status.load(std::memory_order_acquire);
    if (status == 1) return;
    if (status == 2) std::rethrow_exception(op.error);
    if (Clock::now() >= deadline) throw_timeout(op, deadline);
    if (moved) {
      backoff.reset();
    } else if (hint_ && hint_->sleep_between_polls()) {
      // In the background (DDP's buckets during backward) the waiter gives its core to the
      // computation until the peer moves: woken by the pair's doorbell where it has one, not
      // by timed polls that each cost a switch and find the peer's news up to 200 us late.
      // Capped, so that peer liveness is still checked every few polls.
      auto until = std::min(deadline, Clock::now() + kLongestBackgroundSleep);
      if (!sleep_until_peer(op.peer, until, seen)) {
        backoff.pause_background(notifier_.get(), seen, deadline);
      }
    } else {
      backoff.pause(notifier_.get(), seen, !polled_.empty(), deadline);
    }
  }
}

bool Context::sleep_until_peer(int peer, Deadline until, uint64_t seen) {
  return pair_for(peer, "sleep_until_peer").sleep_until_peer(until, notifier_.get(), seen);
}

void Context::wait_all(std::vector<Request>& requests, Deadline deadline) {
  // Waiting on each in turn drives all pairs, so order does not matter for progress; errors
  // surface for the first failed request in the list.
  for (Request& r : requests) {
    if (r.valid()) r.wait(deadline);
  }
}

void Context::throw_timeout(OpState& op, Deadline deadline) {
  Pair& p = *pairs_[size_t(op.peer)];
  Timeout e(detail::str("transport: ", op.describe(), " (", p.kind(), ", tag ", op.header.tag,
                        ") passed its deadline; ", op.done_bytes, " of ", op.bytes,
                        " bytes transferred; check that rank ", op.peer,
                        " is alive and calls the same operations"));
  p.abort(std::make_exception_ptr(e));
  throw e;
}

void Context::close() {
  for (auto& p : pairs_) {
    if (p) p->close();
  }
}

void Context::request_abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (abort_requested_.load(std::memory_order_relaxed)) return;  // the first reason stands
    abort_reason_ = reason;
  }
  abort_requested_.store(true, std::memory_order_release);
  notifier_->notify();  // a waiter asleep on the notifier looks again
}

void Context::abort_if_requested() {
  if (aborted_) return;
  aborted_ = true;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    reason = abort_reason_;
  }
  abort(reason);
}

void Context::abort(const std::string& reason) {
  auto e = std::make_exception_ptr(IoError(reason));
  for (auto& p : pairs_) {
    if (p) p->abort(e);
  }
}

}  // namespace cohort::comm::transport
