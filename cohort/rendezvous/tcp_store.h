#pragma once
// TcpStore: a Store backed by a TcpStoreServer (tcp_store_server.h), usually at
// MASTER_ADDR:MASTER_PORT (bootstrap.h builds the options from the environment).
//
// Each call sends one request frame and reads one response on a connection it has to itself;
// connections are pooled, and a call from a second thread while the first is blocked in get()
// or wait() opens another one. So one TcpStore may be shared by every thread of a rank, and a
// blocked get() never delays another thread's set().
//
// The server enforces get/wait deadlines (it answers "timeout" when they pass), so a timed-out
// call leaves its connection usable. If the server itself stops answering, the call fails at
// its deadline plus a grace period, and that connection is discarded. A later call opens a new
// connection, retrying a refused connect for at most 5 s: a server that is gone is an error,
// not a hang.
#include <memory>
#include <mutex>
#include <vector>

#include "cohort/net/secret.h"
#include "cohort/net/socket.h"
#include "cohort/rendezvous/store.h"
#include "cohort/rendezvous/wire.h"

namespace cohort::rendezvous {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // required: the server's port
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  // Default deadline of get/wait and of every other call's round trip.
  Millis timeout = std::chrono::seconds(300);
  // How long to keep retrying a refused connection: the server may start after its clients.
  Millis connect_timeout = std::chrono::seconds(60);
};

class TcpStore : public Store {
 public:
  // Connects (retrying until connect_timeout) and authenticates. Timeout if no server answers;
  // IoError "authentication failed: wrong job secret for store at HOST:PORT" if it refuses us.
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;
  std::string describe() const override { return "store at " + address_; }

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected,
                       const Bytes& desired) override;
  bool do_delete_key(const std::string& key) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;

 private:
  net::Fd open_connection(net::Deadline deadline);
  net::Fd acquire(net::Deadline deadline);
  void release(net::Fd fd);
  // One round trip. `server_wait` is how long the server may hold the request (get/wait);
  // the response deadline is that plus the store timeout for the round trip itself.
  wire::Response call(const wire::Request& q, Millis server_wait);
  // Throws what the server's non-OK status means for this request.
  [[noreturn]] void throw_status(const wire::Request& q, const wire::Response& r,
                                 Clock::time_point start, Millis timeout) const;

  TcpStoreOptions options_;
  std::string address_;  // "127.0.0.1:29500"
  std::mutex pool_mu_;   // guards idle_
  std::vector<net::Fd> idle_;
};

}  // namespace cohort::rendezvous
