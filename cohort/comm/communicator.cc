#include "cohort/comm/communicator.h"

#include <algorithm>
#include <numeric>

#include "cohort/comm/collectives.h"
#include "cohort/comm/transport/shm/shm_arena.h"
#include "cohort/core/logging.h"
#include "cohort/rendezvous/store.h"

namespace cohort::comm {

namespace {
constexpr uint64_t kP2PTagBit = uint64_t{1} << 63;
}

std::shared_ptr<Communicator> Communicator::create(std::shared_ptr<rendezvous::Store> store,
                                                   int rank, int size, CommOptions options) {
  COHORT_CHECK_ARG(store != nullptr, "Communicator::create: store is null");
  COHORT_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "Communicator::create: rank ", rank,
                   " is not in [0, ", size, ")");
  COHORT_CHECK_ARG(options.timeout.count() > 0 && options.chunk_bytes > 0,
                   "Communicator::create: timeout and chunk_bytes must be positive");
  return std::shared_ptr<Communicator>(
      new Communicator(std::move(store), rank, size, std::move(options)));
}

Communicator::Communicator(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                           CommOptions options)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      options_(std::move(options)),
      flight_(options_.flight_recorder_size),
      p2p_sent_(size_t(size), 0),
      p2p_received_(size_t(size), 0) {
  transport::ContextOptions co;
  co.connect_timeout = options_.connect_timeout;
  // The n-th communicator a rank creates under a prefix gets namespace "<prefix>/<n>": ranks
  // create communicators in the same order, so they agree, and a second communicator on the
  // same store never reads the first one's (stale) addresses.
  int64_t incarnation = store_->add(detail::str(options_.prefix, "/incarnation/", rank), 1);
  prefix_ = detail::str(options_.prefix, "/", incarnation);
  co.prefix = prefix_;
  ctx_ = transport::Context::create(transport::Device(options_.device), *store_, rank, size, co);
  ctx_->set_wait_hint(wait_hint_);
  topology_ = exchange_host_ids(*store_, prefix_, rank, size,
                                options_.host_id.empty() ? default_host_id() : options_.host_id,
                                options_.connect_timeout);
  if (options_.cost_model) {
    cost_model_ = *options_.cost_model;
  } else {
    // Every rank with a peer on another host has a TCP pair, so all ranks agree.
    bool any_tcp = false;
    for (int p = 0; p < size; ++p) any_tcp |= std::string_view(ctx_->pair_kind(p)) == "tcp";
    cost_model_ = any_tcp ? CostModel::tcp() : CostModel::shared_memory();
  }
}

Communicator::~Communicator() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  ctx_->close();
}

void Communicator::close() {
  ctx_->close();
}

void Communicator::abort(const std::string& reason) {
  ctx_->request_abort(reason);
  std::vector<std::shared_ptr<Communicator>> children;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : children_)
      if (auto c = w.lock()) children.push_back(std::move(c));
  }
  for (auto& c : children) c->abort(reason);
}

std::shared_ptr<Communicator> Communicator::adopt(std::shared_ptr<Communicator> child) {
  if (!child) return child;
  std::lock_guard<std::mutex> lock(mu_);
  children_.push_back(child);
  return child;
}

uint64_t Communicator::next_p2p_seq(int peer, bool send) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = send ? p2p_sent_ : p2p_received_;
  return kP2PTagBit | v[size_t(peer)]++;
}

void Communicator::assign_seq(Op& op) {
  if (op.timeout.count() <= 0) op.timeout = options_.timeout;
  if (!op.p2p) op.seq = next_seq_++;
  FlightEntry e;
  e.seq = op.p2p ? op.seq & ~kP2PTagBit : op.seq;
  e.p2p = op.p2p;
  e.op = op.p2p && op.p2p_name ? op.p2p_name : op_code_name(op.sig.op);
  e.dtype = dtype_short_name(op.sig.dtype);
  e.count = op.sig.count;
  e.bytes = op.sig.count * dtype_size(op.sig.dtype);
  e.peer = op.peer;
  e.root = op.p2p ? -1 : op.sig.root;
  e.algorithm = algorithm_name(op.sig.algorithm);
  op.flight_id = flight_.issue(std::move(e));
}

std::string Communicator::op_name(const Op& op) const {
  if (op.p2p) return detail::str("send/recv #", op.seq & ~kP2PTagBit);
  return detail::str(op_code_name(op.sig.op), " #", op.seq);
}

void Communicator::run(Op op) {
  std::unique_lock<std::mutex> lock(mu_);
  assign_seq(op);
  // Asynchronous operations issued earlier go first: every rank sees one order. Meanwhile this
  // thread waits on them, so they should poll hard (backoff.h, WaitHint).
  wait_hint_->add_waiter();
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  wait_hint_->remove_waiter();
  busy_ = true;
  lock.unlock();
  if (std::exception_ptr error = run_claimed(op)) std::rethrow_exception(error);
}

std::exception_ptr Communicator::run_claimed(Op& op) {
  std::exception_ptr error;
  try {
    execute(op);
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  cv_.notify_all();
  return error;
}

Work Communicator::issue_inline(const std::function<Work()>& issue) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inline_next_ = true;
  }
  Work w;
  try {
    w = issue();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    inline_next_ = false;
    throw;
  }
  std::lock_guard<std::mutex> lock(mu_);
  inline_next_ = false;  // in case `issue` did not submit
  return w;
}

Work Communicator::submit(Op op) {
  Work w;
  bool run_here = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assign_seq(op);
    w = Work::pending(op_name(op), wait_hint_);
    run_here = inline_next_ && !op.p2p && queue_.empty() && !busy_;
    inline_next_ = false;
    if (run_here) {
      busy_ = true;  // claimed: an operation issued after this one waits for it
    } else {
      queue_.emplace_back(std::move(op), w);
      if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
    }
  }
  if (run_here) {
    w.complete(run_claimed(op));
    return w;
  }
  // Rung after unlocking: the worker shares this thread's core and the scheduler lets a woken
  // thread run at once, so a wake-up under the lock made it block on mu_ straight away and
  // switch back (two wasted context switches per launch; 8% of the worker's samples were
  // that lock wait in a DDP profile).
  cv_.notify_all();
  return w;
}

void Communicator::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !busy_); });
    if (queue_.empty()) return;  // stopping, and everything issued has run
    auto [op, work] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    wait_hint_->background.store(true, std::memory_order_relaxed);
    try {
      execute(op);
    } catch (...) {
      error = std::current_exception();
    }
    wait_hint_->background.store(false, std::memory_order_relaxed);
    work.complete(error);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void Communicator::execute(Op& op) {
  COHORT_CHECK_IO(broken_.empty(), op_name(op), " on rank ", rank_,
                  ": this communicator is unusable after an earlier error (", broken_,
                  "); build a new one");
  auto deadline = transport::Clock::now() + op.timeout;
  Exec ex(*ctx_, op.sig, op.seq, deadline, scratch_);
  flight_.start(op.flight_id);
  try {
    op.body(ex);
    flight_.complete(op.flight_id, op.p2p ? -1 : int64_t(op.seq));
  } catch (...) {
    // Arguments were checked before the body ran, so anything thrown here left messages half
    // way: abort, which also withdraws every posted op from the user's buffers.
    fail_op(op);
  }
}

// Adds the operation, the rank and (for a mismatch) both sides' calls to a transport error,
// keeping its type, and marks the communicator broken.
void Communicator::fail_op(const Op& op) {
  std::string name = detail::str(op_name(op), " on rank ", rank_);
  // Peers blocked on this rank learn at once, and why, instead of at their deadlines; the
  // communicator is unusable anyway.
  // Returns where the flight record went, for the error thrown.
  auto give_up = [&](const std::string& msg) {
    broken_ = msg;
    ctx_->abort(msg);
    return record_failure(op, msg);
  };
  try {
    throw;
  } catch (const transport::Mismatch& m) {
    Signature theirs = Signature::decode(m.got);
    bool their_p2p = (m.got.tag & kP2PTagBit) != 0;
    std::string their_call = their_p2p ? detail::str(theirs.describe(), " (point-to-point #",
                                                     m.got.tag & ~kP2PTagBit, ")")
                                       : detail::str(theirs.describe(), " #", m.got.tag);
    std::string msg =
        detail::str(name, ": collective mismatch with rank ", m.peer, ": rank ", rank_, " called ",
                    op.sig.describe(), ", rank ", m.peer, " called ", their_call);
    if (m.got == m.expected) {
      msg += detail::str(" (same call, but ", m.expected_bytes, " vs ", m.got_bytes,
                         " bytes: do the ranks pass the same counts?)");
    }
    throw CollectiveMismatch(msg + give_up(msg));
  } catch (const Timeout& e) {
    std::string msg = detail::str(name, " (", op.sig.describe(), ") timed out after ",
                                  op.timeout.count(), " ms: ", e.what());
    throw Timeout(msg + give_up(msg));
  } catch (const IoError& e) {
    std::string context = detail::str(name, " (", op.sig.describe(), ")");
    std::string note = give_up(context + ": " + e.what());
    rethrow_with_context(std::current_exception(), context + note + ": ");
  } catch (const std::exception& e) {
    give_up(detail::str(name, " (", op.sig.describe(), "): ", e.what()));
    throw;
  } catch (...) {
    give_up(detail::str(name, " (", op.sig.describe(), "): unknown error"));
    throw;
  }
}

std::string Communicator::record_failure(const Op& op, const std::string& error) {
  flight_.fail(op.flight_id, error);
  if (options_.flight_dump_path.empty()) return "";
  try {
    write_flight_dump(options_.flight_dump_path, flight_.dump_json(rank_, size_, error));
  } catch (const std::exception& e) {
    // The original error matters more than its record: say why there is none, keep going.
    log::warn("comm", "rank ", rank_, ": ", e.what());
    return "";
  }
  return detail::str(" [rank ", rank_, " wrote its flight record to ", options_.flight_dump_path,
                     "]");
}

std::shared_ptr<Communicator> Communicator::new_group(const std::vector<int>& ranks) {
  uint64_t id = next_group_++;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  COHORT_CHECK_ARG(!ranks.empty() &&
                       std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                       sorted.front() >= 0 && sorted.back() < size_,
                   "new_group: ranks must be distinct members of [0, ", size_, "), got ",
                   ranks.size(), " ranks");
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  CommOptions o = options_;
  o.prefix = detail::str(prefix_, "/group", id);
  o.flight_dump_path.clear();
  return adopt(create(store_, int(it - ranks.begin()), int(ranks.size()), o));
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  uint64_t id = next_group_++;
  int64_t mine[2] = {color, key};
  std::vector<int64_t> all(size_t(size_) * 2);
  AllgatherOptions ag;
  ag.input = mine;
  ag.output = all.data();
  ag.count = 2;
  ag.dtype = DType::i64;
  allgather(*this, ag);
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (all[size_t(2 * r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[size_t(2 * a + 1)] < all[size_t(2 * b + 1)]; });
  int my_index = int(std::find(members.begin(), members.end(), rank_) - members.begin());
  CommOptions o = options_;
  o.prefix = detail::str(prefix_, "/split", id, "/color", color);
  o.flight_dump_path.clear();
  return adopt(create(store_, my_index, int(members.size()), o));
}

SharedBuffer Communicator::alloc_shared(size_t bytes) {
  const auto& arena = ctx_->arena();
  if (!arena || bytes == 0) return {};
  return SharedBuffer(arena, arena->allocate(bytes), bytes);
}

bool Communicator::has_shared_arena() const {
  return ctx_->arena() != nullptr;
}

bool Communicator::in_shared_arena(const void* p, size_t bytes) const {
  return ctx_->arena() && ctx_->arena()->contains(p, bytes);
}

SharedBuffer::~SharedBuffer() {
  if (arena_) arena_->release(data_);
}

}  // namespace cohort::comm
