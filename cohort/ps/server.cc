#include "cohort/ps/server.h"

#include <cstring>

#include "cohort/core/logging.h"

namespace cohort::ps {

using detail::str;

ParamServer::ParamServer(ServerOptions options) : o_(std::move(options)) {
  COHORT_CHECK_ARG(o_.num_workers >= 1, "parameter server: need at least one worker, got ",
                   o_.num_workers);
  COHORT_CHECK_ARG(o_.index >= 0 && o_.index < o_.num_servers, "parameter server: index ", o_.index,
                   " out of range for ", o_.num_servers, " servers");
  COHORT_CHECK_ARG(o_.make_optimizer && o_.make_schedule,
                   "parameter server: make_optimizer and make_schedule are required");
  layout_ = layout_of(o_.params);
  range_ = partition_keys(layout_.total, o_.num_servers).at(size_t(o_.index));
  shard_ = empty({range_.size()});
  gather_values(o_.params, layout_, range_, shard_.data<float>());
  shard_.set_requires_grad(true);
  opt_ = o_.make_optimizer({{"shard", shard_}});
  grads_.resize(size_t(o_.num_workers));
  last_activity_ = std::chrono::steady_clock::now();
  comm::service::Handlers h;
  h.on_request = [this](const comm::service::Peer& p, uint64_t id, Bytes q) {
    return on_request(p, id, std::move(q));
  };
  h.on_leave = [this](const comm::service::Peer& p, const std::string& why) { on_leave(p, why); };
  server_ = std::make_unique<comm::service::Server>(
      comm::service::ServerOptions{.host = o_.host,
                                   .secret = o_.secret,
                                   .secret_policy = o_.secret_policy,
                                   .name = str("parameter server ", o_.index)},
      std::move(h));
  log::info("ps", who(), " serves keys [", range_.begin, ", ", range_.end, ") of ", layout_.total,
            " at ", server_->address());
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
    if (int(said_bye_.size()) == o_.num_workers) return;
    const auto deadline = last_activity_ + idle_timeout;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= last_activity_ + idle_timeout) {
      throw Timeout(str(who(), ": no request from any worker for ", idle_timeout.count(), " ms (",
                        said_bye_.size(), " of ", o_.num_workers, " workers finished, at step ",
                        step_, "); check that the workers are running"));
    }
  }
}

std::optional<Bytes> ParamServer::on_request(const comm::service::Peer& peer, uint64_t id,
                                             Bytes payload) {
  std::lock_guard<std::mutex> lock(mu_);
  last_activity_ = std::chrono::steady_clock::now();
  const MsgKind kind = peek_kind(payload);
  if (kind == MsgKind::kHello) return hello(peer.id, payload);
  const int rank = rank_of(peer.id, peek_rank(payload));
  if (kind == MsgKind::kPull) return floats_to_bytes(shard_.data<float>(), range_.size());
  if (kind == MsgKind::kPush) return push(peer.id, id, payload);
  said_bye_.insert(rank);
  log::debug("ps", who(), ": worker ", rank, " said bye");
  cv_.notify_all();
  return Bytes{};
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
  if (!schedule_) schedule_ = o_.make_schedule(h.total_steps);
  ranks_[peer] = h.rank;
  return Bytes{};
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
  COHORT_CHECK_ARG(p.range == range_ && p.count == range_.size(), who(), ": worker ", rank,
                   " pushed ", p.count, " values for keys [", p.range.begin, ", ", p.range.end,
                   "); this server owns keys [", range_.begin, ", ", range_.end, ") (",
                   range_.size(), " values)");
  COHORT_CHECK_ARG(p.step == step_, who(), ": worker ", rank, " pushed keys [", p.range.begin, ", ",
                   p.range.end, ") for step ", p.step, ", the server is at step ", step_,
                   " (BSP: every worker pushes every step once)");
  COHORT_CHECK_ARG(!pushed_.count(rank), who(), ": worker ", rank, " pushed keys [", p.range.begin,
                   ", ", p.range.end, ") twice in step ", step_);
  std::vector<float>& g = grads_[size_t(rank)];
  g.resize(size_t(range_.size()));
  std::memcpy(g.data(), p.grads, g.size() * sizeof(float));
  pushed_[rank] = {peer, id};
  if (int(pushed_.size()) == o_.num_workers) apply_update();
  return std::nullopt;
}

void ParamServer::apply_update() {
  const float scale = 1.0f / float(o_.num_workers);
  Tensor grad = empty({range_.size()});
  float* g = grad.data<float>();
  std::copy(grads_[0].begin(), grads_[0].end(), g);
  for (size_t r = 1; r < grads_.size(); ++r) {
    const float* x = grads_[r].data();
    for (int64_t i = 0; i < range_.size(); ++i) g[i] += x[i];
  }
  for (int64_t i = 0; i < range_.size(); ++i) g[i] *= scale;
  shard_.set_grad(grad);
  schedule_->apply(*opt_, step_);
  opt_->step();
  ++step_;
  const Bytes values = floats_to_bytes(shard_.data<float>(), range_.size());
  for (const auto& [rank, pending] : pushed_)
    server_->respond(pending.peer, pending.request_id, values);
  pushed_.clear();
}

void ParamServer::on_leave(const comm::service::Peer& peer, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranks_.find(peer.id);
  if (it == ranks_.end()) return;  // not a worker (refused, or never said hello)
  const int rank = it->second;
  ranks_.erase(it);
  if (said_bye_.count(rank) || !error_.empty()) return;
  error_ = str(who(), ": worker ", rank, " (", peer.address, ") left without saying goodbye",
               why.empty() ? "" : " (" + why + ")", " at step ", step_);
  log::error("ps", error_);
  cv_.notify_all();
}

}  // namespace cohort::ps
