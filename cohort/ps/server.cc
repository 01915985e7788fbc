#include "cohort/ps/server.h"

#include <algorithm>
#include <cstring>

#include "cohort/core/logging.h"

namespace cohort::ps {

using detail::str;

ParamServer::ParamServer(ServerOptions options)
    : o_(std::move(options)),
      decoder_(o_.compression, o_.index, std::max(o_.num_workers, 1)),
      gate_(std::max(o_.num_workers, 1),
            o_.consistency.mode == Mode::kSsp ? o_.consistency.staleness : SspGate::kUnbounded),
      intervals_(std::max(o_.num_workers, 1)) {
  COHORT_CHECK_ARG(o_.num_workers >= 1, "parameter server: need at least one worker, got ",
                   o_.num_workers);
  COHORT_CHECK_ARG(o_.index >= 0 && o_.index < o_.num_servers, "parameter server: index ", o_.index,
                   " out of range for ", o_.num_servers, " servers");
  COHORT_CHECK_ARG(o_.make_optimizer && o_.make_schedule,
                   "parameter server: make_optimizer and make_schedule are required");
  COHORT_CHECK_ARG(
      o_.consistency.backup_workers >= 0 && o_.consistency.backup_workers < o_.num_workers,
      "ps.backup_workers = ", o_.consistency.backup_workers, " must be in [0, ", o_.num_workers,
      ") for ", o_.num_workers, " workers");
  COHORT_CHECK_ARG(o_.consistency.backup_workers == 0 || o_.consistency.mode == Mode::kBsp,
                   "ps.backup_workers applies to ps.mode = 'bsp' only");
  layout_ = layout_of(o_.params);
  sent_version_.assign(size_t(o_.num_workers), 0);
  range_ = partition_keys(layout_.total, o_.num_servers).at(size_t(o_.index));
  shard_ = empty({range_.size()});
  gather_values(o_.params, layout_, range_, shard_.data<float>());
  shard_.set_requires_grad(true);
  opt_ = o_.make_optimizer({{"shard", shard_}});
  grads_.resize(size_t(o_.num_workers));
  durable_.assign(size_t(o_.num_workers), 0);
  if (!o_.ckpt_dir.empty() && o_.ckpt_every > 0) {  // else workers would keep every push
    ckpt_ = std::make_unique<ckpt::CheckpointManager>(
        ckpt::ManagerOptions{.dir = o_.ckpt_dir, .keep = o_.ckpt_keep, .async = false});
    if (o_.restore) restore_newest();
  }
  last_activity_ = std::chrono::steady_clock::now();
  net::service::Handlers h;
  h.on_request = [this](const net::service::Peer& p, uint64_t id, Bytes q) {
    return on_request(p, id, std::move(q));
  };
  h.on_leave = [this](const net::service::Peer& p, const std::string& why) { on_leave(p, why); };
  server_ = std::make_unique<net::service::Server>(
      net::service::ServerOptions{.host = o_.host,
                                  .secret = o_.secret,
                                  .secret_policy = o_.secret_policy,
                                  .name = str("parameter server ", o_.index)},
      std::move(h));
  log::info("ps", who(), " serves keys [", range_.begin, ", ", range_.end, ") of ", layout_.total,
            " at ", server_->address(), " (", mode_name(o_.consistency.mode),
            o_.consistency.mode == Mode::kSsp ? str(", staleness ", o_.consistency.staleness)
                                              : std::string(),
            o_.consistency.backup_workers > 0
                ? str(", ", o_.consistency.backup_workers, " backup workers")
                : std::string(),
            ")");
}

ParamServer::~ParamServer() {
  server_->stop();
}

const std::string& ParamServer::address() const {
  return server_->address();
}

int64_t ParamServer::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

std::string ParamServer::who() const {
  return str("parameter server ", o_.index);
}

void ParamServer::wait(Millis idle_timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!error_.empty()) throw InvalidArgument(error_);
    check_away();
    if (int(said_bye_.size()) == o_.num_workers && final_waiters_.empty()) return;
    auto deadline = last_activity_ + idle_timeout;
    for (const auto& [rank, since] : away_)
      deadline = std::min(deadline, since + o_.rejoin_timeout + Millis(1));
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && away_.empty() &&
        std::chrono::steady_clock::now() >= last_activity_ + idle_timeout) {
      throw Timeout(str(who(), ": no request from any worker for ", idle_timeout.count(), " ms (",
                        said_bye_.size(), " of ", o_.num_workers, " workers finished, at step ",
                        step_, "); check that the workers are running"));
    }
  }
}

std::optional<Bytes> ParamServer::on_request(const net::service::Peer& peer, uint64_t id,
                                             Bytes payload) {
  std::lock_guard<std::mutex> lock(mu_);
  last_activity_ = std::chrono::steady_clock::now();
  metrics_.received(payload.size());
  const MsgKind kind = peek_kind(payload);
  if (kind == MsgKind::kHello) return hello(peer.id, payload);
  const int rank = rank_of(peer.id, peek_rank(payload));
  if (kind == MsgKind::kPull) {
    sent_version_[size_t(rank)] = version_;
    Bytes values = floats_to_bytes(shard_.data<float>(), range_.size());
    metrics_.sent(values.size());
    return values;
  }
  if (kind == MsgKind::kPush) return push(peer.id, id, payload);
  if (kind == MsgKind::kFinal) return final_state(rank);
  said_bye_.insert(rank);
  if (wants_final(payload)) final_waiters_.insert(rank);  // stay until it has them
  gate_.leave(rank);                                      // a finished worker holds no one back
  if (ckpt_) save_checkpoint();  // its pushes are all in: none is left to replay
  release_held();
  log::debug("ps", who(), ": worker ", rank, " said bye");
  cv_.notify_all();
  return Bytes{};
}

// A finished worker waiting for the job's final parameters (the ones every worker's pushes
// went into: what rank 0 evaluates and checkpoints). It asks again until all said bye.
Bytes ParamServer::final_state(int rank) {
  COHORT_CHECK_ARG(said_bye_.count(rank), who(), ": worker ", rank,
                   " asked for the final parameters before saying bye");
  FinalState f{.done = int(said_bye_.size()) == o_.num_workers,
               .finished = int32_t(said_bye_.size()),
               .workers = o_.num_workers,
               // every push counts (a BSP straggler's late pushes are dropped, not applied)
               .progress = stats_.pushes + version_ + step_};
  Bytes b = encode_final(f, shard_.data<float>(), range_.size());
  metrics_.sent(b.size());
  // The waiter stays until its connection closes (on_leave): this answer may still be in the
  // socket's queue, and stopping the server now would cut it off.
  return b;
}

Bytes ParamServer::hello(uint64_t peer, const Bytes& payload) {
  Hello h = decode_hello(payload);
  COHORT_CHECK_ARG(h.rank >= 0 && h.rank < o_.num_workers, who(), ": worker rank ", h.rank,
                   " is out of range for ", o_.num_workers, " workers");
  COHORT_CHECK_ARG(h.num_workers == o_.num_workers, who(), ": worker ", h.rank, " is in a job of ",
                   h.num_workers, " workers, this server expects ", o_.num_workers);
  const std::string diff =
      first_difference(h.layout, layout_, str("worker ", h.rank), who() + "'s model");
  if (!diff.empty()) {
    const std::string msg =
        str(who(), ": worker ", h.rank, "'s model differs from the server's at ", diff,
            "; every worker and server must build the same model");
    log::warn("ps", msg);
    throw InvalidArgument(msg);
  }
  const std::string codec = codec_difference(h.codec, codec_spec(o_.compression));
  if (!codec.empty()) {
    const std::string msg = str(who(), ": worker ", h.rank, " ", codec,
                                "; every worker and server must have the same ps.compression keys");
    log::warn("ps", msg);
    throw InvalidArgument(msg);
  }
  for (const auto& [other, rank] : ranks_)
    COHORT_CHECK_ARG(rank != h.rank, who(), ": worker ", h.rank,
                     " said hello twice (it is already connected)");
  if (!schedule_) schedule_ = o_.make_schedule(h.total_steps);
  if (away_.count(h.rank)) rejoin(h.rank);
  ranks_[peer] = h.rank;
  return encode_hello_reply({next_step(h.rank), uint8_t(ckpt_ ? 1 : 0), accept_shared(h)});
}

uint8_t ParamServer::accept_shared(const Hello& h) {
  areas_.erase(h.rank);  // an earlier connection's
  if (!h.shared || !o_.shared_memory) return 0;
  std::string why;
  std::unique_ptr<SharedArea> a = SharedArea::open(*h.shared, layout_.total, &why);
  if (!a) {
    log::debug("ps", who(), ": worker ", h.rank, " pushes through the socket: its shared area ",
               h.shared->name, " cannot be used here (", why, ")");
    return 0;
  }
  areas_[h.rank] = std::move(a);
  return 1;
}

int ParamServer::rank_of(uint64_t peer, int32_t claimed) const {
  auto it = ranks_.find(peer);
  COHORT_CHECK_ARG(it != ranks_.end(), who(), ": a request from a peer that has not said hello");
  COHORT_CHECK_ARG(it->second == claimed, who(), ": worker ", it->second,
                   " sent a request as worker ", claimed);
  return it->second;
}

std::optional<Bytes> ParamServer::push(uint64_t peer, uint64_t id, const Bytes& payload) {
  Push p = decode_push(payload);
  const int rank = rank_of(peer, p.rank);
  if (p.shared) {
    auto area = areas_.find(rank);
    COHORT_CHECK_ARG(area != areas_.end(), who(), ": worker ", rank, " pushed keys [",
                     p.range.begin, ", ", p.range.end,
                     ") through a shared area, but this server mapped none for it");
    p.grads = reinterpret_cast<const uint8_t*>(area->second->grads() + range_.begin);
  }
  decoder_.check(p, rank, range_, who());
  COHORT_CHECK_ARG(p.codec != 0 || (p.range == range_ && p.count == range_.size()), who(),
                   ": worker ", rank, " pushed ", p.count, " values for keys [", p.range.begin,
                   ", ", p.range.end, "); this server owns keys [", range_.begin, ", ", range_.end,
                   ") (", range_.size(), " values)");
  if (p.shared) metrics_.received(size_t(p.count) * sizeof(float));  // the values, in memory
  const auto now = std::chrono::steady_clock::now();
  if (!first_push_) first_push_ = now;
  intervals_.pushed(rank, now);
  ++stats_.pushes;
  std::optional<Bytes> now_answer = o_.consistency.mode == Mode::kBsp
                                        ? push_bsp(rank, peer, id, p)
                                        : push_async(rank, peer, id, p);
  sample_after_push();
  return now_answer;
}

void ParamServer::sample_after_push() {
  const int64_t waiting = int64_t(pushed_.size() + held_.size());
  auto interval = metrics_.pushed(waiting, stats_.updates, std::chrono::steady_clock::now());
  if (!interval || !o_.on_interval) return;
  try {
    o_.on_interval(*interval);
  } catch (const std::exception& e) {  // metrics must not fail a push
    log::warn("ps", who(), ": could not record its interval metrics: ", e.what());
  }
}

std::optional<Bytes> ParamServer::push_bsp(int rank, uint64_t peer, uint64_t id, const Push& p) {
  const bool late = o_.consistency.backup_workers > 0 && p.step < step_;
  COHORT_CHECK_ARG(late || p.step == step_, who(), ": worker ", rank, " pushed keys [",
                   p.range.begin, ", ", p.range.end, ") for step ", p.step,
                   ", the server is at step ", step_,
                   " (BSP: every worker pushes every step once)");
  PushReply reply;
  reply.staleness = int32_t(version_ - sent_version_[size_t(rank)]);
  record_staleness(reply.staleness);
  if (late) {  // step p.step was applied without it: dropped, answered with the current values
    ++stats_.dropped;
    reply.dropped = 1;
    return answer(rank, reply, p.shared);
  }
  COHORT_CHECK_ARG(!pushed_.count(rank), who(), ": worker ", rank, " pushed keys [", p.range.begin,
                   ", ", p.range.end, ") twice in step ", step_);
  std::vector<float>& g = grads_[size_t(rank)];
  g.resize(size_t(range_.size()));
  read_grad(p, rank, g.data());
  pushed_[rank] = {peer, id, reply, {}, p.shared};
  if (int(pushed_.size()) == o_.num_workers - o_.consistency.backup_workers) apply_update();
  return std::nullopt;
}

std::optional<Bytes> ParamServer::push_async(int rank, uint64_t peer, uint64_t id, const Push& p) {
  COHORT_CHECK_ARG(p.step == gate_.clock(rank), who(), ": worker ", rank, " pushed keys [",
                   p.range.begin, ", ", p.range.end, ") for step ", p.step, ", expected step ",
                   gate_.clock(rank), " (each worker pushes its steps in order, once)");
  // The gradient where it lies in the request when it is aligned (it is in a fresh payload),
  // else copied (or decoded) into a reused tensor; before the clock moves, so a push that
  // cannot be decoded leaves no trace.
  const bool in_place = p.codec == 0 && reinterpret_cast<uintptr_t>(p.grads) % alignof(float) == 0;
  if (!in_place && !push_grad_.defined()) push_grad_ = empty({range_.size()});
  if (!in_place) read_grad(p, rank, push_grad_.data<float>());
  PushReply reply;
  reply.staleness = int32_t(version_ - sent_version_[size_t(rank)]);
  reply.lead = int32_t(gate_.push(rank));
  record_staleness(reply.staleness);
  optimize(in_place
               ? from_external(const_cast<uint8_t*>(p.grads), {range_.size()}, DType::f32, nullptr)
               : push_grad_,
           progress(),  // the server's global step: the schedule follows the job, not the pusher
           o_.consistency.staleness_lr ? std::max(1.0, double(reply.staleness)) : 1.0);
  if (in_place) shard_.set_grad(Tensor());  // it pointed into the request, about to be freed
  after_update();
  std::optional<Bytes> now;
  if (gate_.may_proceed(rank)) {
    now = answer(rank, reply, p.shared);
  } else {
    held_[rank] = {peer, id, reply, std::chrono::steady_clock::now(), p.shared};
    ++stats_.held;
  }
  release_held();  // this push may have moved the slowest worker on
  return now;
}

void ParamServer::read_grad(const Push& p, int rank, float* out) const {
  const size_t n = size_t(range_.size());
  if (p.codec == 0) {
    std::memcpy(out, p.grads, n * sizeof(float));
    return;
  }
  std::fill(out, out + n, 0.0f);
  decoder_.decode_add(p, rank, {out, n});
}

void ParamServer::record_staleness(int64_t tau) {
  stats_.max_staleness = std::max(stats_.max_staleness, tau);
  staleness_sum_ += double(tau);
}

void ParamServer::optimize(Tensor grad, int64_t step, double lr_divisor) {
  shard_.set_grad(grad);
  schedule_->apply(*opt_, step);
  if (lr_divisor != 1.0) opt_->set_lr(opt_->lr() / lr_divisor);
  opt_->step();
  ++version_;
  ++stats_.updates;
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - *first_push_).count();
}

Bytes ParamServer::answer(int rank, PushReply reply, bool shared) {
  reply.version = version_;
  reply.durable = durable_[size_t(rank)];
  sent_version_[size_t(rank)] = version_;
  intervals_.answered(rank, std::chrono::steady_clock::now());
  const float* values = shard_.data<float>();
  const size_t n = size_t(range_.size());
  // The area the push came through (if it is still that worker's: else the values go in the
  // answer): the worker waits for this answer and does not touch the area until it has it.
  auto area = shared ? areas_.find(rank) : areas_.end();
  if (area != areas_.end()) {
    std::memcpy(area->second->values() + range_.begin, values, n * sizeof(float));
    reply.shared = 1;
    values = nullptr;
  }
  Bytes b = encode_push_reply(reply, values, range_.size());
  metrics_.sent(b.size() + (values ? 0 : n * sizeof(float)));  // the values, either way
  return b;
}

void ParamServer::release_held() {
  for (auto it = held_.begin(); it != held_.end();) {
    if (!gate_.may_proceed(it->first)) {
      ++it;
      continue;
    }
    Pending& h = it->second;
    h.reply.held_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - h.since).count();
    server_->respond(h.peer, h.request_id, answer(it->first, h.reply, h.shared));
    it = held_.erase(it);
  }
}

void ParamServer::apply_update() {
  // The pushes of step_ in rank order (all N, or the first N - b to arrive).
  const float scale = 1.0f / float(pushed_.size());
  Tensor grad = empty({range_.size()});
  float* g = grad.data<float>();
  bool first = true;
  for (const auto& [rank, pending] : pushed_) {
    const std::vector<float>& x = grads_[size_t(rank)];
    if (first) {
      std::copy(x.begin(), x.end(), g);
      first = false;
    } else {
      for (int64_t i = 0; i < range_.size(); ++i) g[i] += x[size_t(i)];
    }
  }
  for (int64_t i = 0; i < range_.size(); ++i) g[i] *= scale;
  optimize(grad, step_, 1.0);
  ++step_;
  after_update();
  for (const auto& [rank, pending] : pushed_)
    server_->respond(pending.peer, pending.request_id, answer(rank, pending.reply, pending.shared));
  pushed_.clear();
}

ServerStats ParamServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServerStats s = stats_;
  s.mean_staleness = s.pushes > 0 ? staleness_sum_ / double(s.pushes) : 0;
  for (int r = 0; r < o_.num_workers; ++r) s.median_step_s.push_back(intervals_.median_s(r));
  s.straggler = find_straggler(intervals_);
  s.traffic = metrics_.total();
  return s;
}

void ParamServer::on_leave(const net::service::Peer& peer, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranks_.find(peer.id);
  if (it == ranks_.end()) return;  // not a worker (refused, or never said hello)
  const int rank = it->second;
  ranks_.erase(it);
  if (final_waiters_.erase(rank)) cv_.notify_all();  // it gave up waiting: do not wait for it
  if (said_bye_.count(rank) || !error_.empty()) return;
  const std::string left =
      str(who(), ": worker ", rank, " (", peer.address, ") left without saying goodbye",
          why.empty() ? "" : " (" + why + ")", " at step ", next_step(rank));
  if (o_.rejoin_timeout.count() > 0) {
    // It may be restarted: forget its unanswered push (it comes again), stop waiting for it.
    log::warn("ps", left, "; waiting up to ", o_.rejoin_timeout.count(), " ms for it to rejoin");
    away_[rank] = std::chrono::steady_clock::now();
    pushed_.erase(rank);
    held_.erase(rank);
    gate_.leave(rank);
    release_held();
  } else {
    error_ = left;
    log::error("ps", error_);
  }
  cv_.notify_all();
}

void ParamServer::rejoin(int rank) {
  away_.erase(rank);
  gate_.rejoin(rank);
  log::info("ps", who(), ": worker ", rank, " rejoined at step ", next_step(rank));
}

void ParamServer::check_away() const {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [rank, since] : away_) {
    if (now - since < o_.rejoin_timeout) continue;
    throw InvalidArgument(str(who(), ": worker ", rank,
                              " left without saying goodbye and did not rejoin within ",
                              o_.rejoin_timeout.count(), " ms (at step ", next_step(rank), ")"));
  }
}

}  // namespace cohort::ps
