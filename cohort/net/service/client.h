#pragma once
// service::Client: a peer of a service::Server (server.h). It connects (retrying while the
// server is not up yet, until connect_timeout), proves it knows the job secret, and then:
//   request()  sends a request and waits for the matching response, with a deadline; several
//              threads may have requests outstanding on one client at once, and responses may
//              come back in any order (they are matched by id);
//   send()     sends a message that expects no reply;
//   receive()  takes the next message the server pushed, waiting at most a deadline.
//
// A background thread reads the connection and hands each frame to whoever waits for it. When
// the connection ends (the server stops, drops us, or the network fails), every pending and
// later call throws IoError naming the server ("service at 127.0.0.1:41234 closed the
// connection"); messages already received can still be taken. A client does not reconnect by
// itself: make a new one.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "cohort/net/service/wire.h"
#include "cohort/core/error.h"
#include "cohort/net/auth.h"
#include "cohort/net/secret.h"
#include "cohort/net/socket.h"
#include "cohort/net/tls.h"

namespace cohort::net::service {

using Millis = std::chrono::milliseconds;

// The server was reached and refused us (a wrong certificate, CA or job secret), or could not
// prove it is the job's: retrying does not help, unlike a server that is not up yet.
using HandshakeError = net::AuthRefused;

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // required: the server's port
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  std::string name = "service";  // errors say "<name> at HOST:PORT"
  // How long to keep retrying a refused connection: the server may start after its clients.
  Millis connect_timeout = std::chrono::seconds(60);
  Millis timeout = std::chrono::seconds(300);   // default deadline of request() and send()
  size_t max_payload_bytes = size_t{64} << 20;  // per frame, both ways
  // Pushed messages held for receive(): past this many bytes the client drops the connection
  // (IoError naming the server) rather than grow without bound while nobody receives.
  size_t max_inbox_bytes = size_t{1} << 30;
  // Non-empty: TLS with the job's certificates (net/tls.h); the server's certificate
  // must name `host`.
  net::TlsOptions tls;
};

class Client {
 public:
  // Connects and authenticates. Timeout if no server answers within connect_timeout;
  // HandshakeError "authentication failed: wrong job secret for service at HOST:PORT" if it
  // refuses us, or "TLS handshake with ... failed: <reason>" for certificates.
  explicit Client(ClientOptions options);
  // close().
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends a request and waits for its response. Timeout past the deadline (the connection
  // stays usable; a late response is discarded); InvalidArgument if the server's handler
  // refused it (its message); IoError if the connection is gone.
  Bytes request(std::span<const uint8_t> payload);
  Bytes request(std::span<const uint8_t> payload, Millis timeout);
  // Sends a message; returns once it is handed to the socket.
  void send(std::span<const uint8_t> payload);
  // The next message the server pushed, or std::nullopt if none came within timeout. IoError
  // once the connection is gone and every received message has been taken.
  std::optional<Bytes> receive(Millis timeout);

  // Closes the connection; pending calls fail with IoError. Idempotent.
  void close();
  bool connected() const;
  std::string describe() const { return options_.name + " at " + address_; }

 private:
  void read_loop();
  // Waits for data and reads at most `room` bytes into dst, adding the count to *have; false
  // when the connection ended.
  bool read_some(uint8_t* dst, size_t room, size_t* have);
  // False when the inbox would pass max_inbox_bytes (the message is not kept).
  bool deliver(Kind kind, uint64_t id, Bytes payload);
  void malformed(const std::string& why);  // the server broke the protocol: drop it
  void inbox_overflow();
  void fail(const std::string& why);  // the connection is gone: wake every waiter
  void write_frame(Kind kind, uint64_t id, std::span<const uint8_t> payload, Millis timeout);
  void check_size(std::span<const uint8_t> payload, const char* what) const;
  void handshake(net::Deadline deadline);  // TLS (if any), then the secret's
  // Sends head then payload through TLS (write_mu_ held).
  void write_tls(std::span<const uint8_t> head, std::span<const uint8_t> payload,
                 net::Deadline deadline, const char* what);

  struct Pending {
    bool done = false;
    bool error = false;
    Bytes payload;
  };

  ClientOptions options_;
  std::string address_;  // "127.0.0.1:41234"
  net::Fd fd_;
  net::Fd wake_fd_;  // eventfd: close() interrupts the reader's poll() through it
  std::unique_ptr<net::TlsContext> tls_ctx_;  // TLS only
  std::unique_ptr<net::TlsStream> tls_;
  // Guards tls_ (the reader reads while writers write); the innermost lock, never held across
  // a poll().
  std::mutex tls_mu_;
  std::thread reader_;
  std::once_flag close_once_;
  std::mutex write_mu_;  // one frame at a time on the socket; taken before mu_, never after
  // Lock order: write_mu_, then mu_.
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;  // outstanding requests by id
  std::deque<Bytes> inbox_;              // pushed messages not yet received
  size_t inbox_bytes_ = 0;
  std::string failure_;  // non-empty once the connection is gone
};

}  // namespace cohort::net::service
