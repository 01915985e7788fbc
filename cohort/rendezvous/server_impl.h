#pragma once
// Internals of TcpStoreServer, shared by tcp_store_server.cc (event loop, sockets, handshake)
// and server_requests.cc (executing requests, parking gets and waits). Everything here runs on
// the loop thread only, except the atomics in stats_ and stop_.
#include <atomic>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cohort/core/log_rate_limiter.h"
#include "cohort/rendezvous/auth.h"
#include "cohort/rendezvous/kv_table.h"
#include "cohort/rendezvous/socket.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "cohort/rendezvous/wire.h"

namespace cohort::rendezvous {

// Stop reading from a client that does not read its answers once this much is queued for it.
inline constexpr size_t kServerMaxUnsent = size_t{8} << 20;

struct ServerConn {
  enum class State { kAuth, kReady, kClosing };
  uint64_t id = 0;
  Fd fd;
  std::string peer;  // "10.0.0.3:51234", for every log line about this connection
  State state = State::kAuth;
  bool dead = false;  // erased at the end of the loop iteration
  std::optional<auth::ServerHandshake> handshake;
  Bytes in;  // received, not yet parsed: in[in_pos..]
  size_t in_pos = 0;
  Bytes out;  // queued, not yet sent: out[out_pos..]
  size_t out_pos = 0;
  Clock::time_point deadline;  // kAuth: finish the handshake; kClosing: finish sending
  // A get or wait whose keys are missing: answered when they appear or at park_deadline.
  std::optional<wire::Request> parked;
  std::string park_key;  // the missing key it is registered under in parked_by_key_
  Clock::time_point park_deadline;

  size_t unparsed() const { return in.size() - in_pos; }
  size_t unsent() const { return out.size() - out_pos; }
};

class TcpStoreServer::Impl {
 public:
  explicit Impl(TcpStoreServerOptions options);
  ~Impl();
  Stats stats() const;

  TcpStoreServerOptions options_;
  Listener listener_;
  std::string address_;

 private:
  // tcp_store_server.cc
  void run();
  void poll_once();
  int next_timeout_ms() const;
  void accept_all();
  void on_readable(ServerConn& c);
  void read_handshake(ServerConn& c);
  void read_requests(ServerConn& c);
  void flush(ServerConn& c);
  // Counts the refusal and logs it (rate-limited) naming the peer; the caller closes.
  void note_refusal(ServerConn& c, Refusal why, const std::string& specifics);
  void refuse(ServerConn& c, Refusal why, const std::string& specifics);  // note_refusal + kill
  void drop(ServerConn& c, const std::string& why);  // our own failure: logs an error, closes
  void kill(ServerConn& c);                          // closes without logging
  void log_refusal_totals() const;
  void expire(Clock::time_point now);
  void reap();

  // server_requests.cc
  void process(ServerConn& c);  // parses and executes buffered frames until parked or short
  void execute(ServerConn& c, wire::Request&& q);
  void park(ServerConn& c, wire::Request&& q);
  void unpark(ServerConn& c);
  bool try_answer_parked(ServerConn& c);
  void wake(const std::string& key);
  void reply(ServerConn& c, wire::Command command, const wire::Response& r);

  Fd wake_fd_;  // eventfd: the destructor's way to interrupt poll()
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::unordered_map<uint64_t, std::unique_ptr<ServerConn>> conns_;
  std::unordered_map<std::string, std::vector<uint64_t>> parked_by_key_;
  std::vector<uint64_t> resume_;  // unparked connections with buffered frames to process
  KvTable table_;
  uint64_t next_id_ = 1;
  Clock::time_point accept_paused_until_{};
  log::RateLimiter refusal_log_;  // the "refused <peer>" lines
  struct AtomicStats {
    std::atomic<uint64_t> accepted{0}, authenticated{0}, auth_failures{0}, dropped{0}, open{0},
        keys{0};
    std::array<std::atomic<uint64_t>, kRefusalKinds> refused{};
  } stats_;
};

}  // namespace cohort::rendezvous
