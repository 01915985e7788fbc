#pragma once
// TcpEndpoint: a context's TCP side: one listener (port chosen by the OS, published in the
// store) and one event-loop thread that moves bytes for every TCP pair of the context.
//
// Connection setup (blocking, with the context's connect deadline): the higher rank connects to
// the lower rank's listener; both prove the job secret (net/auth.h, context
// "cohort-tcp-v1") before anything else is read, then the connector sends a hello naming its
// rank and the world size. A connection that fails the handshake is logged and dropped; the
// listener keeps waiting for the real peers.
//
// The event loop: epoll, edge-triggered. Posting an op tries the socket at once from the
// caller's thread (small messages usually complete there); the loop thread finishes the rest
// when the socket becomes readable or writable and rings the context's Notifier.
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cohort/comm/transport/backoff.h"
#include "cohort/comm/transport/transport.h"
#include "cohort/net/socket.h"

namespace cohort::comm::transport {

class TcpPair;

class TcpEndpoint {
 public:
  TcpEndpoint(const DeviceOptions& options, int rank, int size, Notifier* notifier);
  ~TcpEndpoint();
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  // The address peers connect to: "host:port".
  const std::string& address() const { return address_; }

  // Connects to a lower rank's listener, authenticates and says hello.
  std::unique_ptr<TcpPair> connect_to(int peer, const std::string& address, Deadline deadline);
  // Accepts until every rank in `peers` has connected. Returns pairs indexed like `peers`.
  std::vector<std::unique_ptr<TcpPair>> accept_from(const std::vector<int>& peers,
                                                    Deadline deadline);
  // Registers the pairs with the event loop and starts its thread.
  void start(const std::vector<TcpPair*>& pairs);
  // Stops the loop thread; pairs are not touched by it afterwards.
  void stop();

 private:
  // Reads the hello on an authenticated socket; returns the peer's rank.
  int read_hello(int fd, Deadline deadline, const std::string& who);
  std::unique_ptr<TcpPair> make_pair(int peer, net::Fd fd);
  void loop();

  DeviceOptions options_;
  int rank_;
  int size_;
  Notifier* notifier_;
  net::Listener listener_;
  std::string address_;
  net::Fd epoll_;
  net::Fd wake_;  // eventfd: stop()
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cohort::comm::transport
