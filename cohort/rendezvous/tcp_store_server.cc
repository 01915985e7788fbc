#include "cohort/rendezvous/tcp_store_server.h"

#include <utility>

#include "cohort/core/error.h"
#include "cohort/rendezvous/server_impl.h"

namespace cohort::rendezvous {
namespace {

net::ServerLoopOptions loop_options(const TcpStoreServerOptions& o) {
  net::ServerLoopOptions l;
  l.host = o.host;
  l.port = o.port;
  l.secret = o.secret;
  l.secret_policy = o.secret_policy;
  l.auth_timeout = o.auth_timeout;
  l.backlog = o.backlog;
  l.auth_context = std::string(net::auth::kStoreContext);
  l.owner = "TcpStoreServer";
  l.log_subsystem = "store";
  l.name = "store server";
  // A parked client should be silent; one that sends more than a frame is not a cohort client.
  l.max_unparsed = wire::kHeaderBytes + wire::kMaxBodyBytes;
  l.max_unsent = kServerMaxUnsent;
  return l;
}

}  // namespace

TcpStoreServer::Impl::Impl(TcpStoreServerOptions options) : loop_(loop_options(options), this) {
  loop_.start();
}

TcpStoreServer::Impl::~Impl() {
  loop_.stop();  // before the table and the parked requests go
}

TcpStoreServer::Stats TcpStoreServer::Impl::stats() const {
  Stats s;
  static_cast<net::ServerStats&>(s) = loop_.stats();
  s.keys = keys_.load();
  return s;
}

void TcpStoreServer::Impl::on_close(net::ServerConn& c, const std::string& /*why*/) {
  unpark(c);
}

Clock::time_point TcpStoreServer::Impl::next_timer() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [id, p] : parked_) next = std::min(next, p.deadline);
  return next;
}

// Connections woken by another client's write may have frames queued behind the answered one.
void TcpStoreServer::Impl::after_events() {
  process_resumed();
}

void TcpStoreServer::Impl::process_resumed() {
  while (!resume_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(resume_);
    for (uint64_t id : ids)
      if (net::ServerConn* c = loop_.find(id)) process(*c);
  }
}

// Parked requests past their deadline are answered with a timeout status and the keys still
// missing; frames the client queued behind them are then served.
void TcpStoreServer::Impl::on_timer(Clock::time_point now) {
  std::vector<uint64_t> due;
  for (const auto& [id, p] : parked_)
    if (now >= p.deadline) due.push_back(id);
  for (uint64_t id : due) {
    net::ServerConn* c = loop_.find(id);
    if (!c) continue;
    const ParkedRequest& p = parked_.at(id);
    wire::Response r;
    r.status = wire::Status::kTimeout;
    r.keys = table_.missing(p.request.keys);
    wire::Command cmd = p.request.command;
    unpark(*c);
    reply(*c, cmd, r);
    resume_.push_back(id);
  }
  process_resumed();
  keys_.store(table_.size());
}

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
TcpStoreServer::~TcpStoreServer() = default;
const std::string& TcpStoreServer::host() const {
  return impl_->loop_.host();
}
uint16_t TcpStoreServer::port() const {
  return impl_->loop_.port();
}
std::string TcpStoreServer::address() const {
  return impl_->loop_.address();
}
TcpStoreServer::Stats TcpStoreServer::stats() const {
  return impl_->stats();
}

}  // namespace cohort::rendezvous
