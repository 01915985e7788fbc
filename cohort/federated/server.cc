// FlServer's connections: hello, the handlers that check and file what clients send, and
// leaving. The rounds themselves are in server_round.cc.
#include "cohort/federated/server.h"

#include <algorithm>
#include <cmath>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/federated/server_round.h"
#include "cohort/net/pki.h"

namespace cohort::federated {

FlServer::FlServer(FlServerOptions options) : options_(std::move(options)) {
  net::service::Handlers h;
  h.on_request = [this](const net::service::Peer& p, uint64_t, Bytes payload) {
    return on_request(p, std::move(payload));
  };
  h.on_leave = [this](const net::service::Peer& p, const std::string& why) { on_leave(p, why); };
  service_ = std::make_unique<net::service::Server>(options_.service, std::move(h));
  log::info("fl", "federated server listening on ", service_->address(),
            options_.service.tls.enabled() ? " (TLS)" : "", ", model of ", options_.layout.total,
            " parameters");
}

FlServer::~FlServer() {
  service_->stop();
}

const std::string& FlServer::address() const {
  return service_->address();
}

std::vector<uint32_t> FlServer::connected() const {
  std::lock_guard lock(mu_);
  std::vector<uint32_t> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  return ids;
}

uint64_t FlServer::client_samples(uint32_t id) const {
  std::lock_guard lock(mu_);
  auto it = clients_.find(id);
  return it == clients_.end() ? 0 : it->second.samples;
}

int FlServer::wait_for_clients(int n, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return int(clients_.size()) >= n; });
  return int(clients_.size());
}

void FlServer::wait_for_clients_to_leave(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return clients_.empty(); });
}

void FlServer::set_round(int64_t round) {
  std::lock_guard lock(mu_);
  round_ = round;
}

uint64_t FlServer::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

void FlServer::say_bye() {
  for (uint32_t id : connected()) send_to(id, encode_bye(), nullptr);
}

void FlServer::refuse(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    ++refused_;
  }
  log::warn("fl", "refused: ", why);
  throw InvalidArgument(why);
}

std::optional<Bytes> FlServer::on_request(const net::service::Peer& peer, Bytes payload) {
  MsgKind kind;
  try {
    kind = peek_kind(payload, "message from " + peer.address);
  } catch (const InvalidArgument& e) {
    refuse(e.what());
  }
  try {
    switch (kind) {
      case MsgKind::kHello:
        return on_hello(peer, payload);
      case MsgKind::kUpdate:
        on_update(peer, std::move(payload));
        return Bytes{};
      case MsgKind::kSecAgg:
        on_secagg(peer, std::move(payload));
        return Bytes{};
      default:
        break;
    }
  } catch (const InvalidArgument& e) {
    refuse(e.what());
  }
  refuse("a client's message of kind " + std::to_string(int(kind)) + " from " + peer.address +
         " (clients send hello, update and secagg)");
  return std::nullopt;
}

Bytes FlServer::on_hello(const net::service::Peer& peer, const Bytes& payload) {
  const Hello h = decode_hello(payload, "hello from " + peer.address);
  const std::string who = "client " + std::to_string(h.client_id) + " (" + peer.address + ")";
  const std::string diff =
      ps::first_difference(options_.layout, h.layout, "the server's model", who + "'s model");
  COHORT_CHECK_ARG(diff.empty(), who, " has another model: ", diff,
                   "; every client must build the server's model.* config");
  check_certificate(peer, h.client_id);
  std::lock_guard lock(mu_);
  auto same_peer = peer_client_.find(peer.id);
  COHORT_CHECK_ARG(same_peer == peer_client_.end() || same_peer->second == h.client_id, who,
                   " already said hello as client ",
                   same_peer == peer_client_.end() ? 0 : same_peer->second, " on this connection");
  auto old = clients_.find(h.client_id);
  if (old != clients_.end() && old->second.peer != peer.id) {
    // A restarted client whose old connection is not closed yet: the newest one wins. The old
    // connection held this round's task, which the new one cannot answer.
    log::warn("fl", who, " connected again; its previous connection (", old->second.address,
              ") no longer counts");
    peer_client_.erase(old->second.peer);
    if (open_ && open_->task_ids.contains(h.client_id)) open_->gone.insert(h.client_id);
  }
  clients_[h.client_id] = Client{peer.id, peer.address, h.num_samples};
  peer_client_[peer.id] = h.client_id;
  log::info("fl", who, " joined with ", h.num_samples, " samples (", clients_.size(),
            " connected)");
  cv_.notify_all();
  return encode(Welcome{round_, options_.expected_clients});
}

// Under TLS the job CA names each client (CN client-<i>, net/pki.h); the id a client
// claims must be that one. Otherwise a client holding client 1's certificate could join as
// client 2, train on client 2's data part and answer client 2's tasks.
void FlServer::check_certificate(const net::service::Peer& peer, uint32_t claimed) const {
  if (!options_.service.tls.enabled()) return;  // plain TCP: only the secret, no identity
  const std::string expected = net::client_cert_name(claimed);
  if (peer.certificate == expected) return;
  const std::string& cn = peer.certificate;
  const bool is_client = cn.rfind("client-", 0) == 0;
  COHORT_CHECK_ARG(false, "a client at ", peer.address, " claims to be client ", claimed,
                   " but its certificate names ",
                   is_client ? "client " + cn.substr(7) : "'" + cn + "'", " (CN ",
                   cn.empty() ? std::string("none") : cn, ", expected CN ", expected,
                   "): a client's --client-id must be the id of the certificate it presents");
}

uint32_t FlServer::client_of(const net::service::Peer& peer) const {
  std::lock_guard lock(mu_);
  auto it = peer_client_.find(peer.id);
  COHORT_CHECK_ARG(it != peer_client_.end(), "a message from ", peer.address,
                   ", which has not said hello");
  return it->second;
}

void FlServer::on_update(const net::service::Peer& peer, Bytes payload) {
  const uint32_t id = client_of(peer);
  const std::string who = "client " + std::to_string(id);
  Update u = decode_update(payload, "update from " + who);
  COHORT_CHECK_ARG(u.client_id == id, "update from ", who, " claims to be client ", u.client_id);
  COHORT_CHECK_ARG(int64_t(u.delta.size()) == options_.layout.total, "update from ", who, " has ",
                   u.delta.size(), " values; the model has ", options_.layout.total);
  const bool finite =
      std::all_of(u.delta.begin(), u.delta.end(), [](float v) { return std::isfinite(v); });
  COHORT_CHECK_ARG(finite, "update from ", who, " for round ", u.round, " holds NaN or infinity");
  std::lock_guard lock(mu_);
  Round* r = open_.get();
  check_expected(r, id, u.round, u.task_id, 0, "update");
  r->reports[id].bytes.bytes_in += payload.size();
  r->updates.emplace(id, std::move(u));
  cv_.notify_all();
}

void FlServer::on_secagg(const net::service::Peer& peer, Bytes payload) {
  const uint32_t id = client_of(peer);
  SecAggMsg m =
      decode_secagg(payload, "secure-aggregation message from client " + std::to_string(id));
  COHORT_CHECK_ARG(m.client_id == id, "secure-aggregation message from client ", id,
                   " claims to be client ", m.client_id);
  std::lock_guard lock(mu_);
  Round* r = open_.get();
  check_expected(r, id, m.round, m.task_id, uint8_t(m.phase), phase_name(m.phase));
  r->reports[id].bytes.bytes_in += payload.size();
  r->answers.emplace(id, std::move(m.body));
  cv_.notify_all();
}

void FlServer::on_leave(const net::service::Peer& peer, const std::string& why) {
  std::lock_guard lock(mu_);
  auto it = peer_client_.find(peer.id);
  if (it == peer_client_.end()) return;
  const uint32_t id = it->second;
  peer_client_.erase(it);
  clients_.erase(id);
  log::info("fl", "client ", id, " (", peer.address, ") left",
            why.empty() ? std::string() : ": " + why, " (", clients_.size(), " connected)");
  if (open_) open_->gone.insert(id);
  cv_.notify_all();
}

void FlServer::send_to(uint32_t client, Bytes payload, ClientReport* report) {
  uint64_t peer = 0;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(client);
    if (it == clients_.end()) return;  // gone: the round's wait counts it out
    peer = it->second.peer;
    if (report) report->bytes.bytes_out += payload.size();
  }
  service_->send(peer, std::move(payload));
}

}  // namespace cohort::federated
