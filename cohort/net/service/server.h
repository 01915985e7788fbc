#pragma once
// service::Server: the server side of cohort's service channel, for long-lived services whose
// peers come and go (parameter servers, federated-learning servers). Clients are
// service::Client (client.h); the frames are wire.h's.
//
// It runs on net::ServerLoop, the event loop the rendezvous store runs on, so it behaves
// as the store does towards the network: it binds loopback unless given an address; every peer
// proves it knows the per-job secret (net/auth.h) before anything else is read; one
// thread polls every peer; a peer that sends garbage, a frame over max_payload_bytes, or stops
// in the middle of a frame for frame_timeout is closed with one warning naming it and the
// reason, at most 5 such lines a second; everyone else is served on.
//
// Peers: a peer joins when its handshake succeeds (on_join) and leaves when its connection
// closes for any reason, its own or ours (on_leave, with the reason). A leave is an event,
// never an exception. Peer ids are never reused by one server.
//
// Threads: the handlers run on the loop thread, one at a time, and must not block for long
// (they hold up every peer). send(), respond() and fail() may be called from any thread,
// handlers included; they queue and return at once.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cohort/net/service/wire.h"
#include "cohort/net/secret.h"
#include "cohort/net/server_loop.h"
#include "cohort/net/tls.h"

namespace cohort::net::service {

using Millis = std::chrono::milliseconds;

struct ServerOptions {
  // Interface to bind: loopback by default; "0.0.0.0" or "::" (with a secret) to expose it.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks a free port; read it back with port()
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  // Names the service in logs (the log subsystem) and errors: "parameter server".
  std::string name = "service";
  Millis auth_timeout = std::chrono::seconds(10);   // to finish the handshake
  Millis frame_timeout = std::chrono::seconds(60);  // to finish a frame once it has begun
  size_t max_payload_bytes = size_t{64} << 20;      // per frame, both ways
  // A peer with more than this queued for it and not read is dropped as a slow reader.
  size_t max_queued_bytes = size_t{1} << 30;
  // Non-empty: TLS with the job's certificates (net/tls.h), then the secret's handshake.
  net::TlsOptions tls;
};

struct Peer {
  uint64_t id = 0;      // unique for the server's lifetime
  std::string address;  // "127.0.0.1:51234"
  // TLS servers: the common name of the certificate the peer presented, verified against the
  // job CA ("client-3", net/pki.h); who the CA says it is, whatever it later claims.
  // Empty on plain TCP.
  std::string certificate;
};

struct Handlers {
  std::function<void(const Peer&)> on_join;
  // why: empty for a plain disconnect, else the reason ("malformed frame after ...").
  std::function<void(const Peer&, const std::string& why)> on_leave;
  // A request: return the answer, or std::nullopt to answer later with respond() or fail()
  // (from any thread). A thrown exception fails the request: the client's request() throws
  // InvalidArgument with its message. Without this handler every request fails.
  std::function<std::optional<Bytes>(const Peer&, uint64_t request_id, Bytes payload)> on_request;
  // An unsolicited message from a peer.
  std::function<void(const Peer&, Bytes payload)> on_message;
};

class Server {
 public:
  // Binds, listens and starts the loop. InvalidArgument for a missing secret or an insecure
  // non-loopback bind; IoError if the address cannot be bound.
  Server(ServerOptions options, Handlers handlers);
  // stop().
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Closes every connection: clients' pending and later calls fail with IoError naming this
  // server. Idempotent; not from a handler.
  void stop();

  // Pushes a message to a peer. Dropped (with a debug line) if the peer has left by the time
  // it is sent. InvalidArgument if the payload is over max_payload_bytes.
  void send(uint64_t peer, Bytes payload);
  // Answers a request deferred by on_request (returning nullopt), with a value or an error.
  void respond(uint64_t peer, uint64_t request_id, Bytes payload);
  void fail(uint64_t peer, uint64_t request_id, const std::string& message);

  const std::string& host() const;  // the bound address, e.g. "127.0.0.1"
  uint16_t port() const;
  const std::string& address() const;  // "127.0.0.1:41234"
  net::ServerStats stats() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::net::service
