#pragma once
// Internals of TcpStoreServer, shared by tcp_store_server.cc (the store on its ServerLoop) and
// server_requests.cc (executing requests, parking gets and waits). The sockets, handshake,
// refusals and the event loop itself are ServerLoop's (server_loop.h); this is the store's
// protocol on top. Everything here runs on the loop thread only, except stats().
#include <atomic>
#include <unordered_map>
#include <vector>

#include "cohort/net/server_loop.h"
#include "cohort/rendezvous/kv_table.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "cohort/rendezvous/wire.h"

namespace cohort::rendezvous {

// Stop reading from a client that does not read its answers once this much is queued for it.
inline constexpr size_t kServerMaxUnsent = size_t{8} << 20;

// A get or wait whose keys are missing: answered when they appear or at `deadline`.
struct ParkedRequest {
  wire::Request request;
  std::string key;  // the missing key it is registered under in parked_by_key_
  Clock::time_point deadline;
};

class TcpStoreServer::Impl : public net::ServerLoop::Handler {
 public:
  explicit Impl(TcpStoreServerOptions options);
  ~Impl() override;
  Stats stats() const;

  net::ServerLoop loop_;

 private:
  // ServerLoop::Handler (tcp_store_server.cc)
  void on_data(net::ServerConn& c) override { process(c); }
  void on_close(net::ServerConn& c, const std::string& why) override;
  Clock::time_point next_timer() const override;
  void on_timer(Clock::time_point now) override;
  void after_events() override;
  void process_resumed();

  // server_requests.cc
  void process(net::ServerConn& c);  // parses and executes buffered frames until parked or short
  void execute(net::ServerConn& c, wire::Request&& q);
  void park(net::ServerConn& c, wire::Request&& q);
  void unpark(net::ServerConn& c);
  bool try_answer_parked(net::ServerConn& c, ParkedRequest& p);
  void wake(const std::string& key);
  void reply(net::ServerConn& c, wire::Command command, const wire::Response& r);

  std::unordered_map<uint64_t, ParkedRequest> parked_;  // by connection id
  std::unordered_map<std::string, std::vector<uint64_t>> parked_by_key_;
  std::vector<uint64_t> resume_;  // unparked connections with buffered frames to process
  KvTable table_;
  std::atomic<uint64_t> keys_{0};
};

}  // namespace cohort::rendezvous
