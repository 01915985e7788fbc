// TcpStoreServer: executing requests and parking the ones that wait (see server_impl.h).
//
// A get or wait on missing keys parks its connection, registered in parked_by_key_ under ONE of
// its missing keys. Writing that key wakes it: if every key is now present it is answered,
// otherwise it re-registers under the next missing key. So a write touches only the waiters of
// the key written, and a waiter on N keys is woken at most N times.
#include <algorithm>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/rendezvous/server_impl.h"

namespace cohort::rendezvous {
namespace {

// Clamp absurd client timeouts so the deadline arithmetic cannot overflow.
constexpr uint64_t kMaxTimeoutMs = uint64_t{30} * 24 * 3600 * 1000;

wire::Response ok() {
  return wire::Response{};
}

}  // namespace

void TcpStoreServer::Impl::process(net::ServerConn& c) {
  while (c.state == net::ServerConn::State::kReady && !c.dead && !parked_.count(c.id) &&
         c.unparsed() > 0 && c.unsent() < kServerMaxUnsent) {
    wire::Request q;
    auto res = wire::parse_request({c.in.data() + c.in_pos, c.unparsed()}, &q);
    if (res.status == wire::ParseStatus::kNeedMore) return;
    if (res.status == wire::ParseStatus::kMalformed)
      return loop_.refuse(c, net::Refusal::kBadFrame, res.error);
    c.in_pos += res.size;
    execute(c, std::move(q));
  }
}

void TcpStoreServer::Impl::execute(net::ServerConn& c, wire::Request&& q) {
  using wire::Command;
  const std::string key = q.keys.empty() ? std::string() : q.keys[0];
  wire::Response r;
  try {
    switch (q.command) {
      case Command::kSet:
        table_.set(key, std::move(q.value));
        reply(c, q.command, ok());
        return wake(key);
      case Command::kGet:
      case Command::kWait:
        if (!table_.contains_all(q.keys)) return park(c, std::move(q));
        if (q.command == Command::kGet) r.value = *table_.find(key);
        return reply(c, q.command, r);
      case Command::kAdd:
        r.number = table_.add(key, q.delta);
        reply(c, q.command, r);
        return wake(key);
      case Command::kCompareSet: {
        bool changed = false;
        r.value = table_.compare_set(key, q.expected, q.value, &changed);
        reply(c, q.command, r);
        if (changed) wake(key);
        return;
      }
      case Command::kDelete:
        r.number = table_.erase(key);
        return reply(c, q.command, r);
      case Command::kCheck:
        r.number = table_.contains_all(q.keys);
        return reply(c, q.command, r);
    }
  } catch (const InvalidArgument& e) {
    // A bad request (add to a non-counter) is the caller's error, not the connection's.
    wire::Response err;
    err.status = wire::Status::kInvalidArgument;
    std::string_view msg = e.what();
    err.value.assign(msg.begin(), msg.end());
    reply(c, q.command, err);
  }
}

void TcpStoreServer::Impl::park(net::ServerConn& c, wire::Request&& q) {
  uint64_t ms = std::min(q.timeout_ms, kMaxTimeoutMs);
  ParkedRequest& p = parked_[c.id];
  p.deadline = Clock::now() + Millis(ms);
  p.request = std::move(q);
  p.key = table_.missing(p.request.keys).front();
  parked_by_key_[p.key].push_back(c.id);
}

void TcpStoreServer::Impl::unpark(net::ServerConn& c) {
  auto pit = parked_.find(c.id);
  if (pit == parked_.end()) return;
  auto it = parked_by_key_.find(pit->second.key);
  if (it != parked_by_key_.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
    if (ids.empty()) parked_by_key_.erase(it);
  }
  parked_.erase(pit);
}

// Answers c's parked request p if all its keys are present; else re-registers it under the next
// missing key. Returns whether it was answered.
bool TcpStoreServer::Impl::try_answer_parked(net::ServerConn& c, ParkedRequest& p) {
  std::vector<std::string> missing = table_.missing(p.request.keys);
  if (!missing.empty()) {
    p.key = missing.front();
    parked_by_key_[p.key].push_back(c.id);
    return false;
  }
  wire::Response r;
  wire::Command cmd = p.request.command;
  if (cmd == wire::Command::kGet) r.value = *table_.find(p.request.keys[0]);
  parked_.erase(c.id);
  reply(c, cmd, r);
  return true;
}

void TcpStoreServer::Impl::wake(const std::string& key) {
  auto it = parked_by_key_.find(key);
  if (it == parked_by_key_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  parked_by_key_.erase(it);
  for (uint64_t id : ids) {
    net::ServerConn* c = loop_.find(id);
    auto pit = parked_.find(id);
    if (!c || pit == parked_.end() || pit->second.key != key) continue;
    if (try_answer_parked(*c, pit->second)) resume_.push_back(id);
  }
}

void TcpStoreServer::Impl::reply(net::ServerConn& c, wire::Command command,
                                 const wire::Response& r) {
  wire::encode_response(command, r, &c.out);
  loop_.flush(c);
}

}  // namespace cohort::rendezvous
