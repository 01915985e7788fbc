#pragma once
// TcpStoreServer: the rendezvous store of a job, hosted by the launcher or by rank 0; clients
// are TcpStore (tcp_store.h). Protocol: auth.h (handshake), then wire.h (frames).
//
// One thread runs a poll() event loop over non-blocking sockets (ServerLoop, server_loop.h, the
// loop the service channel in net/service/ runs on too), so one server serves thousands of
// ranks without a thread per client. A get or wait on a missing key parks that connection;
// it is answered the moment the key is written, or with a timeout status at its deadline.
// Nothing polls or spins while waiting.
//
// Hostile input is expected: a connection that sends garbage, a malformed frame or an oversize
// length is dropped; a wrong secret is refused; a peer that does not finish authenticating
// within auth_timeout is dropped. Each refused peer leaves one warning naming it and the reason,
//   [W ... store] refused 127.0.0.1:50412: bad HMAC (wrong job secret?)
// at most 5 such lines a second (a flood is counted, and the next line printed says
// "(+37 more refused in the last 1.0 s)"), is counted by reason (enum Refusal in
// server_loop.h) in stats().refused, and the server's shutdown prints the totals. The server keeps
// serving everyone else.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cohort/net/secret.h"
#include "cohort/net/server_loop.h"
#include "cohort/rendezvous/store.h"

namespace cohort::rendezvous {

struct TcpStoreServerOptions {
  // Interface to bind. Loopback by default, so nothing off this host can reach the store unless
  // asked: "0.0.0.0" or "::" for every interface, or one address of this host.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks a free port; read it back with port()
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  Millis auth_timeout = std::chrono::seconds(10);
  int backlog = 1024;
};

class TcpStoreServer {
 public:
  // ServerStats (server_loop.h): accepted, authenticated, auth_failures, dropped, open and
  // refused (by Refusal), plus the keys held.
  struct Stats : net::ServerStats {
    uint64_t keys = 0;  // keys held
  };

  // Binds, listens and starts the loop. InvalidArgument for a missing secret (see
  // SecretPolicy) or an insecure non-loopback bind; IoError if the address cannot be bound.
  explicit TcpStoreServer(TcpStoreServerOptions options);
  // Stops the loop and closes every connection; clients then get IoError.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const std::string& host() const;  // the bound address, e.g. "127.0.0.1"
  uint16_t port() const;            // the bound port
  std::string address() const;      // "127.0.0.1:41234"
  Stats stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::rendezvous
