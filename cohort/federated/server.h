#pragma once
// FlServer: the network side of a federated server. It serves the protocol of messages.h on
// the service channel (net/service: a loopback bind unless told otherwise, the job secret,
// TLS with the job's certificates) and runs one round at a time for the coordinator
// (coordinator.h): send the sampled clients their task, collect their updates (or, under
// secure aggregation, run the four phases of secagg.h), until everyone answered or the
// deadline passed. A client that disconnects or misses a deadline is left out of the round and
// reported; one that connects again (same id) takes part in later rounds. Under TLS a client's
// id is the one its certificate names (CN client-<id>): a hello claiming another is refused.
//
// Threads: the service's loop thread runs the handlers, which only check a message and file
// it; run_round() (the coordinator's thread) waits for them on a condition variable, so a slow
// round never holds up the network. Lock order: mu_ only.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cohort/core/byte_meter.h"
#include "cohort/federated/messages.h"
#include "cohort/net/service/server.h"

namespace cohort::federated {
namespace secagg {
class Server;
}

// Between phases, and after a round's last: no client message is expected.
inline constexpr uint8_t kClosedPhase = 0xff;

using Clock = std::chrono::steady_clock;

struct FlServerOptions {
  net::service::ServerOptions service;  // name, host, port, secret, tls
  ps::Layout layout;                    // the model's; a client with another is refused
  int expected_clients = 0;             // fl.clients, told to clients in the welcome
};

struct RoundPlan {
  int64_t round = 0;
  std::vector<uint32_t> sampled;  // client ids
  TaskSettings settings;
  std::vector<float> global;                       // the model the clients start from
  Clock::time_point deadline;                      // the round's
  std::chrono::milliseconds phase_timeout{10000};  // secure aggregation's key phases
  size_t pool = 0;  // clients it was sampled from (DP's sampling rate is sampled / pool)
};

// One sampled client's part in a round.
struct ClientReport {
  uint32_t id = 0;
  bool completed = false;
  std::string dropped_why;  // empty when completed
  ByteCounts bytes;         // in: what the client sent the server; out: what the server sent it
};

struct RoundResult {
  std::vector<Update> updates;         // plain rounds: the updates that came in time
  std::vector<uint64_t> secure_sum;    // secure rounds: the sum of the masked inputs
  std::vector<uint32_t> contributors;  // whose inputs the result holds
  std::vector<ClientReport> clients;   // every sampled client
  std::string failure;                 // non-empty: too few clients, the round does not count
};

class FlServer {
 public:
  // Binds and serves. InvalidArgument for a missing secret or insecure bind (service.h).
  explicit FlServer(FlServerOptions options);
  ~FlServer();
  FlServer(const FlServer&) = delete;
  FlServer& operator=(const FlServer&) = delete;

  const std::string& address() const;
  // Clients that said hello and are still connected, sorted by id.
  std::vector<uint32_t> connected() const;
  // Samples a client reported at hello (0 if unknown).
  uint64_t client_samples(uint32_t id) const;
  // Waits until n clients are connected or the deadline passes; the count connected.
  int wait_for_clients(int n, Clock::time_point deadline);
  // After say_bye: waits until every client closed its connection or the deadline passes.
  void wait_for_clients_to_leave(Clock::time_point deadline);
  // The round clients are told at hello.
  void set_round(int64_t round);
  RoundResult run_round(const RoundPlan& plan);
  // Tells every connected client training is over. Called once at the end.
  void say_bye();
  const ps::Layout& layout() const { return options_.layout; }
  // Messages refused since the start (replays, stale or malformed updates, another model).
  uint64_t refused() const;
  net::service::Server& service() { return *service_; }

  struct Round;  // server_round.cc

 private:
  std::optional<Bytes> on_request(const net::service::Peer& peer, Bytes payload);
  Bytes on_hello(const net::service::Peer& peer, const Bytes& payload);
  void on_update(const net::service::Peer& peer, Bytes payload);
  void on_secagg(const net::service::Peer& peer, Bytes payload);
  void on_leave(const net::service::Peer& peer, const std::string& why);
  // TLS: InvalidArgument, naming both ids, unless the peer's certificate is client `claimed`'s.
  void check_certificate(const net::service::Peer& peer, uint32_t claimed) const;
  // The client a peer said hello as; InvalidArgument if it did not.
  uint32_t client_of(const net::service::Peer& peer) const;
  [[noreturn]] void refuse(const std::string& why);
  void send_to(uint32_t client, Bytes payload, ClientReport* report);

  RoundResult run_plain(const RoundPlan& plan);
  RoundResult run_secure(const RoundPlan& plan);
  void send_tasks(const RoundPlan& plan);
  // Waits until every id in `expected` answered the open phase (or left) or the deadline;
  // notes why each other one is out, moves the phase's messages to *answers (if given) and
  // opens next_phase. The ids that answered.
  std::set<uint32_t> wait_answers(const std::set<uint32_t>& expected, Clock::time_point deadline,
                                  uint8_t next_phase, std::map<uint32_t, Bytes>* answers);
  // A secure phase: wait_answers, then each answer into `sa`; one it refuses drops its client.
  std::set<uint32_t> secure_take(secagg::Server& sa, const std::set<uint32_t>& expected,
                                 Clock::time_point deadline, uint8_t next_phase);
  void secure_send(const std::set<uint32_t>& to, int64_t round, SecAggPhase phase,
                   const std::function<Bytes(uint32_t)>& body_for);

  struct Client {
    uint64_t peer = 0;
    std::string address;
    uint64_t samples = 0;
  };

  FlServerOptions options_;
  std::unique_ptr<net::service::Server> service_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, Client> clients_;        // by client id
  std::map<uint64_t, uint32_t> peer_client_;  // peer id -> client id
  int64_t round_ = 0;
  std::unique_ptr<Round> open_;  // the round in progress, null between rounds
  uint64_t refused_ = 0;
};

}  // namespace cohort::federated
