#pragma once
// ServerLoop: the event loop under cohort's long-lived servers, the rendezvous store
// (TcpStoreServer) and the service channel (net/service/). It owns the listening socket and
// one thread running poll() over every connection; what a connection's bytes mean is the
// Handler's business (each protocol cuts them into frames with frame.h).
//
// What it does for every protocol alike:
//   - binds loopback unless given another address, and refuses to serve a non-loopback address
//     without a job secret (SecretPolicy);
//   - authenticates each connection (auth.h, with the protocol's own context) before reading
//     anything else from it; a peer that does not finish within auth_timeout is dropped;
//   - reads into the connection's buffer, writes its queue without blocking, stops reading from
//     a peer that does not read what is queued for it (max_unsent); a send that moves nothing
//     (a peer that connected and closed, even in the middle of a TLS handshake) ends that
//     connection, counted as kHungUp before authentication, and never holds up the others;
//   - refuses hostile peers (garbage, wrong secret, oversize or stalled frames) with one
//     warning naming the peer and the reason, at most 5 lines a second (log::RateLimiter), and
//     counts every refusal by reason; the totals are logged when the loop stops;
//   - reports an authenticated connection that closes, for whatever reason, to the Handler
//     (on_close), never as an exception out of the loop;
//   - runs closures posted from other threads (post()) on the loop thread.
//
// Threads: every Handler callback and every method marked "loop thread" runs on the loop
// thread. stats() and post() may be called from any thread.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cohort/core/log_rate_limiter.h"
#include "cohort/net/auth.h"
#include "cohort/net/secret.h"
#include "cohort/net/socket.h"
#include "cohort/net/tls.h"

namespace cohort::net {

// The same spellings as rendezvous/store.h (net sits below the store and cannot include it).
using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Why a server turned a connection away; ServerStats::refused counts each.
enum class Refusal {
  kNotHandshake,  // its first bytes are not a cohort handshake (random bytes, wrong port)
  kBadHmac,       // its handshake proof is wrong: it does not know the job secret
  kAuthTimeout,   // it did not finish the handshake within auth_timeout
  kHungUp,        // it closed (or reset) the connection before authenticating
  kBadFrame,      // authenticated, then sent a malformed frame (e.g. a huge length field)
  kFrameTimeout,  // authenticated, then left a frame unfinished for frame_timeout
  kTlsHandshake,  // TLS servers: the TLS handshake failed (no or a foreign certificate, garbage)
};
inline constexpr size_t kRefusalKinds = 7;
// "not a cohort handshake", "bad HMAC", "auth timeout", "hung up", "bad frame", "frame timeout",
// "TLS handshake failed".
const char* refusal_name(Refusal r);

struct ServerLoopOptions {
  // Interface to bind: loopback by default; "0.0.0.0" or "::" for every interface.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks a free port
  Secret secret;
  SecretPolicy secret_policy = SecretPolicy::kRequired;
  Millis auth_timeout = std::chrono::seconds(10);
  int backlog = 1024;
  std::string auth_context;              // the handshake's context, e.g. auth::kStoreContext
  std::string owner = "server";          // names the server in argument errors: "TcpStoreServer"
  std::string log_subsystem = "server";  // "store"
  std::string name = "server";           // log lines say "<name> <address>: ..."
  // A ready connection with more unparsed bytes buffered than this is refused (kBadFrame).
  size_t max_unparsed = size_t{1} << 20;
  // Reading from a connection pauses while this much is queued, unsent, for it.
  size_t max_unsent = size_t{8} << 20;
  // > 0: a ready connection whose buffered bytes stop short of a frame, with no frame completed
  // for this long, is refused (kFrameTimeout). 0: no limit.
  Millis frame_timeout{0};
  // Non-empty: every connection is TLS (tls.h) with these files; the secret's handshake then
  // runs inside it.
  TlsOptions tls;
};

// A byte vector whose resize() leaves new bytes uninitialized: the receive buffer grows by a
// read chunk before every recv(), and zero-filling that chunk each time cost more than the
// copy out of the kernel (rendezvous, parameter-server pushes of megabytes).
template <typename T>
struct NoInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;  // default-init: no zeroing
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
};
using RecvBytes = std::vector<uint8_t, NoInitAllocator<uint8_t>>;

struct ServerConn {
  enum class State { kAuth, kReady, kClosing };
  uint64_t id = 0;
  Fd fd;
  std::string peer;  // "10.0.0.3:51234", for every log line about this connection
  State state = State::kAuth;
  bool dead = false;  // erased at the end of the loop iteration
  std::optional<auth::ServerHandshake> handshake;
  std::unique_ptr<TlsStream> tls;  // TLS servers only: every byte goes through it
  std::string cert_name;  // TLS, once ready: the CN of its verified certificate ("client-3")
  RecvBytes in;  // received, not yet parsed: in[in_pos..]; the handler advances in_pos
  size_t in_pos = 0;
  // A large frame body received straight into its own buffer, not through `in` (no copy out of
  // it afterwards). The handler starts it (start_body) once it has parsed the frame's header;
  // while body_have < body.size() the loop reads into body; once it is full the handler takes
  // it (take_body). body_kind and body_tag are the handler's notes about the frame.
  Bytes body;
  size_t body_have = 0;
  bool body_active = false;
  uint8_t body_kind = 0;
  uint64_t body_tag = 0;
  Bytes out;  // queued, not yet sent: out[out_pos..]
  size_t out_pos = 0;
  Clock::time_point deadline;         // kAuth: finish the handshake; kClosing: finish sending
  Clock::time_point partial_since{};  // kReady: when the unfinished frame in `in` began

  size_t unparsed() const { return in.size() - in_pos; }
  bool body_full() const { return body_active && body_have == body.size(); }
  // Moves the n bytes buffered after in_pos (n <= size) into a new body of `size` bytes.
  void start_body(size_t size, size_t n, uint8_t kind, uint64_t tag);
  Bytes take_body();
  size_t unsent() const { return out.size() - out_pos; }
};

struct ServerStats {
  uint64_t accepted = 0;       // connections accepted
  uint64_t authenticated = 0;  // of which passed the handshake
  uint64_t auth_failures = 0;  // refused: wrong secret
  uint64_t dropped = 0;        // dropped for garbage, malformed frames or timeouts
  uint64_t open = 0;           // connections open now
  std::array<uint64_t, kRefusalKinds> refused{};  // connections refused, by Refusal
  uint64_t refused_total() const;
};

class ServerLoop {
 public:
  // The protocol on top. Every callback runs on the loop thread; an exception out of one drops
  // that connection (logged as an internal error), never the server.
  class Handler {
   public:
    virtual ~Handler() = default;
    // c passed the handshake.
    virtual void on_ready(ServerConn& /*c*/) {}
    // c (ready) has unparsed bytes or room to queue more: parse and answer what is complete.
    virtual void on_data(ServerConn& c) = 0;
    // A ready connection is closing: the peer hung up, or it was refused or dropped. `why` is
    // empty for a plain hang-up.
    virtual void on_close(ServerConn& /*c*/, const std::string& /*why*/) {}
    // The handler's own earliest deadline (time_point::max() for none), and the call made
    // when the loop wakes up, with the time.
    virtual Clock::time_point next_timer() const { return Clock::time_point::max(); }
    virtual void on_timer(Clock::time_point /*now*/) {}
    // After each round of socket events (e.g. to serve connections another one woke).
    virtual void after_events() {}
  };

  // Checks the options, binds and listens; does not start the thread (start() does, once the
  // handler is ready). InvalidArgument for a missing secret or an insecure non-loopback bind,
  // IoError if the address cannot be bound.
  ServerLoop(ServerLoopOptions options, Handler* handler);
  // stop().
  ~ServerLoop();
  ServerLoop(const ServerLoop&) = delete;
  ServerLoop& operator=(const ServerLoop&) = delete;

  void start();
  // Stops the loop and closes every connection (peers see the connection close; on_close is not
  // called). Logs the refusal totals once. Idempotent; not from the loop thread.
  void stop();

  const std::string& host() const { return listener_.host; }
  uint16_t port() const { return listener_.port; }
  const std::string& address() const { return address_; }  // "127.0.0.1:41234"
  const ServerLoopOptions& options() const { return options_; }
  ServerStats stats() const;

  // Any thread: runs fn on the loop thread at its next wake-up (soon). Dropped after stop().
  void post(std::function<void()> fn);

  // Loop thread only.
  ServerConn* find(uint64_t id);  // null when gone (or dying)
  void flush(ServerConn& c);      // sends what is queued, as far as the socket takes it
  // Counts the refusal and logs it (rate-limited) naming the peer; the caller closes.
  void note_refusal(ServerConn& c, Refusal why, const std::string& specifics);
  void refuse(ServerConn& c, Refusal why, const std::string& specifics);  // note + close
  void drop(ServerConn& c, const std::string& why);        // our own failure: logs an error, closes
  void close(ServerConn& c, const std::string& why = "");  // closes without logging
  // Lets the handler parse what is buffered (on_data), then runs the frame timer. The loop
  // calls it after every event on c; call it after queuing to c from outside an event (a
  // posted task), since a flush may have made room to process frames held back.
  void serve(ServerConn& c);

 private:
  void run();
  void poll_once();
  int next_timeout_ms() const;
  void run_posted();
  void accept_all();
  void on_readable(ServerConn& c);
  void read_handshake(ServerConn& c);
  void read_frames(ServerConn& c);
  void read_body(ServerConn& c);  // into c.body, the frame body being received
  // recv/send with MSG_DONTWAIT, through c.tls on a TLS server.
  ssize_t conn_recv(ServerConn& c, void* buf, size_t n);
  ssize_t conn_send(ServerConn& c, const void* buf, size_t n);
  void log_refusal_totals() const;
  void expire(Clock::time_point now);
  void reap();

  ServerLoopOptions options_;
  Handler* handler_;
  Listener listener_;
  std::string address_;
  Fd wake_fd_;                           // eventfd: post() and stop() interrupt poll() through it
  std::unique_ptr<TlsContext> tls_ctx_;  // TLS servers only
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool stopped_ = false;
  std::mutex post_mu_;  // guards posted_
  std::vector<std::function<void()>> posted_;
  std::unordered_map<uint64_t, std::unique_ptr<ServerConn>> conns_;
  uint64_t next_id_ = 1;
  Clock::time_point accept_paused_until_{};
  log::RateLimiter refusal_log_;  // the "refused <peer>" lines
  struct AtomicStats {
    std::atomic<uint64_t> accepted{0}, authenticated{0}, auth_failures{0}, dropped{0}, open{0};
    std::array<std::atomic<uint64_t>, kRefusalKinds> refused{};
  } stats_;
};

}  // namespace cohort::net
