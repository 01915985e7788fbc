#pragma once
// PsWorker: a worker's connections to the S parameter servers of its job (server.h).
// It finds each server's address in the rendezvous store (generation_key, server_key),
// connects with the job secret, and says hello with its model's layout; a server with another
// model refuses it, and the constructor throws that refusal (which names the first differing
// parameter).
//
// Server restarts: when the servers checkpoint (their hello answer says so), the worker keeps
// each push it sent to a server until that server's answers say a checkpoint holds it
// (PushReply::durable). When a server's connection breaks, the worker waits (up to `timeout`)
// for a restarted server to publish a new generation, says hello again, and replays its kept
// pushes from the step the restarted server resumed from, in order, before going on. Memory:
// about ckpt.every_steps pushes of the model's size. Without checkpoints a broken connection is
// an IoError naming the server, as before.
//
// Compressed pushes (WorkerOptions::compression, push_codec.h): each server's range is encoded
// with that link's codec and residual; the kept pushes are the encoded frames.
//
// push_pull() sends every server its range of the gradient at once (one request per server,
// all in flight before waiting for any) and writes back the values each server answers once
// the server answers (BSP: the step's update is applied; SSP: the slowest worker is close
// enough). Every wait has the deadline `timeout`; an error names the
// server ("parameter server 1 at 127.0.0.1:41234").
//
// start_push() and finish_push_pull() are push_pull() cut in two, for pushes that start one
// server at a time while backward still runs (ps.overlap, push_overlap.h): each server's push
// runs on a lane of its own (push_lanes.h), with the same frame, recovery and kept pushes.
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cohort/net/service/client.h"
#include "cohort/ps/consistency.h"
#include "cohort/ps/protocol.h"
#include "cohort/ps/push_codec.h"
#include "cohort/ps/push_lanes.h"
#include "cohort/rendezvous/store.h"

namespace cohort::ps {

using Millis = std::chrono::milliseconds;

struct WorkerOptions {
  int rank = 0;
  int num_workers = 1;
  int num_servers = 1;
  std::shared_ptr<rendezvous::Store> store;  // where the servers published their addresses
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  Millis timeout = std::chrono::seconds(300);  // find, connect, and each request
  int64_t total_steps = 0;                     // sent in hello, for the servers' LR schedule
  Consistency consistency;                     // the servers' mode (the worker reports it)
  // A worker restarted alone: it resumes where the servers are (start_step()) instead of
  // requiring them to be at step 0.
  bool rejoin = false;
  // The whole job was resumed (run.resume = auto): in ASP/SSP the servers' checkpoints may
  // hold this worker's clock further apart than one push (each saved on its own schedule).
  bool resumed = false;
  // Compressed pushes (push_codec.h): the servers must be given the same. A residual per
  // server lives here; the kept pushes (above) are the encoded frames, replayed as they were.
  PushCompression compression;
  // Offer the servers a shared area (shared_area.h): a server on this host then takes the
  // f32 pushes and gives its answers through shared memory. Not with compression.
  bool shared_memory = true;
};

struct TransferStats {
  uint64_t bytes_sent = 0, bytes_received = 0;
  // Compressed pushes only (0 otherwise): the f32 bytes the messages stand for, and the seconds
  // spent encoding them (summed over the servers, which encode in parallel).
  uint64_t raw_bytes = 0;
  double encode_s = 0;
  // finish_push_pull only: when each server's answer was in (by server).
  std::vector<std::chrono::steady_clock::time_point> answered;
  // push_pull: over the servers, the largest staleness, lead and hold, and whether any server
  // dropped the push (BSP with backup workers).
  PushReply reply;
};

class PsWorker {
 public:
  // Connects to every server and says hello. Timeout naming the server that did not publish
  // its address or answer; InvalidArgument with the server's refusal.
  PsWorker(WorkerOptions options, Layout layout);
  ~PsWorker();
  PsWorker(const PsWorker&) = delete;
  PsWorker& operator=(const PsWorker&) = delete;

  // Every key's current value into flat[0, layout.total).
  TransferStats pull(float* flat);
  // Pushes grads[range_i] to server i for `step`, and writes the updated values into values.
  TransferStats push_pull(int64_t step, const float* grads, float* values);
  // push_pull of server i alone, sent from server i's lane: returns at once. grads[range_i]
  // must not change, and values[range_i] not be touched, until finish_push_pull returns.
  void start_push(int i, int64_t step, const float* grads, float* values);
  // Waits for the answers of every start_push of `step` (each server must have been started:
  // InvalidArgument naming the first that was not) and returns what push_pull would.
  // Rethrows the first error by server index once every server's push has ended.
  TransferStats finish_push_pull(int64_t step);
  // Tells every server this worker is done; errors are logged, not thrown.
  // Also after a server restart (it replays what it kept first): the server must hear it.
  // Waits for started pushes first.
  void bye() noexcept;
  // The end of training for the worker that reports it (rank 0): says bye, then waits until
  // every worker did and takes the final values into flat (what every push went into; ASP and
  // SSP workers finish at different times). Timeout naming the server when the job stops
  // moving for `timeout` before every worker finished.
  TransferStats finish(float* flat);
  // Closes the connections without goodbye (the worker is failing): the servers then name it
  // as a worker that left without saying goodbye. A started push fails at once (IoError, not
  // retried) and is waited for.
  void abandon() noexcept;

  const std::vector<KeyRange>& ranges() const { return ranges_; }
  // How many servers this worker reaches through its shared area now.
  int shared_links() const;
  // The flat gradient and values (layout.total floats each) in the shared area, or null when
  // there is none. A push of gradients already there and an answer into values there move
  // nothing (any other buffers work too, with a copy).
  float* grads_buffer() const;
  float* values_buffer() const;
  // The step this worker's next push carries: 0, or where a rejoining worker resumes (the
  // smallest of the servers' next steps for it; a server already past it gets pulls until the
  // worker catches up with it).
  int64_t start_step() const { return start_step_; }

 private:
  // Runs f(i) for every server, all at once (server 0 on the calling thread, every other on
  // its own persistent thread); rethrows the first error (by server index) once all are done.
  template <typename F>
  void on_every_server(F f);
  void wait_final(int i, float* flat);
  class ServerThreads;  // worker.cc: the persistent threads of servers 1..S-1

  // One server: its connection, the generation it was published with, and the pushes kept
  // for a replay (step -> the encoded push, kept whole: no second copy of the gradient).
  struct Link {
    std::unique_ptr<net::service::Client> client;
    int64_t generation = 0;
    bool checkpoints = false;
    int64_t skip_until = 0;  // pushes of steps below this the server already holds
    std::deque<std::pair<int64_t, Bytes>> kept;
    std::unique_ptr<PushEncoder> encoder;  // compressed pushes only
    bool shared = false;                   // the server mapped this worker's shared area
    uint64_t sent = 0;                     // the last push's value or message bytes
    double encode_s = 0;                   // and its encoding time
  };
  // The push frame of `step` to server i: f32 values, or the encoded message.
  Bytes frame(int i, int64_t step, const float* grads);
  // The shared area to offer the servers: null without ps.shared_memory, with compression,
  // or when /dev/shm has no room (logged; the socket is used).
  std::unique_ptr<SharedArea> make_area() const;
  // The push of `step` to server i through its shared area: the answer's values into values.
  PushReply push_shared(int i, int64_t step, const float* grads, float* values,
                        const std::string& what);
  std::string server_name(int i) const;
  // Finds server i's newest address (a generation above `after`), connects, says hello.
  // Returns where its pushes resume. `why`: what broke the last connection, for errors.
  int64_t connect(int i, int64_t after, const std::string& why,
                  std::chrono::steady_clock::time_point deadline);
  // connect() after a broken connection, again while a restarted server fails before it
  // answers hello, until one deadline (Timeout).
  int64_t reconnect(int i, std::string why);
  // Whether server i's link uses a shared area.
  bool shared(int i) const { return links_[size_t(i)].shared; }
  // The servers' next steps for this worker at the start: all 0 for a fresh worker (unless BSP
  // with backup workers went on without it), at most one apart (InvalidArgument otherwise).
  void check_start(const std::vector<int64_t>& next) const;
  PushReply push_to(int i, int64_t step, const float* grads, float* values);
  // A step's replies and traffic, over the servers.
  TransferStats collect(const std::vector<PushReply>& replies) const;
  // Sends kept pushes [from, to) to server i again, in order (their answers are not needed).
  void replay(int i, int64_t from, int64_t to);
  // Runs f() against server i; when its connection breaks and the server checkpoints, waits
  // for the restarted one, replays what it kept up to `step` and runs f() again.
  template <typename F>
  auto with_recovery(int i, int64_t step, F f);

  WorkerOptions o_;
  Layout layout_;
  std::vector<KeyRange> ranges_;
  std::vector<Link> links_;
  std::unique_ptr<SharedArea> area_;
  bool offering_ = false;  // area_'s name is still linked: hellos offer it
  int64_t start_step_ = 0;
  int64_t pushed_steps_ = 0;  // the next step to push (every step below went to every server)
  // Read by lanes (with_recovery: no reconnect once set), set by bye()/abandon().
  std::atomic<bool> said_bye_{false};
  // Guards each Link::client's replacement (connect(), on a lane after a server restart)
  // against abandon() closing the clients from the worker's thread.
  std::mutex clients_mu_;
  // start_push / finish_push_pull: by server, started this step and the answers' headers.
  std::vector<bool> started_;
  std::vector<PushReply> lane_replies_;
  // Started by the first start_push; declared after links_: stopped before the clients go.
  std::unique_ptr<PushLanes> lanes_;
  // Started by the first on_every_server with more than one server; a thread per server per
  // step used to be created and joined instead. Declared last: stopped before the clients go.
  std::unique_ptr<ServerThreads> threads_;
};

}  // namespace cohort::ps
