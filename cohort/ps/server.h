#pragma once
// ParamServer: one of S parameter servers. It owns keys `range` of the flat key space
// (partition.h) with their values and the optimizer state over them, and serves workers on a
// service::Server (net/service/server.h), authenticated with the job secret.
//
// BSP protocol (protocol.h has the messages):
//   1. every worker says hello; its layout must equal the server's (else the hello is refused
//      naming the first differing parameter and the worker's rank), and its job size too;
//   2. a worker pulls the current values (the initial ones: workers start from the servers);
//   3. step t: each worker pushes its gradient of the range for step t; the server keeps the
//      request unanswered until all N pushes of step t arrived, then sets their average (summed
//      in rank order: the same whatever the arrival order) as the gradient of its slice,
//      applies the LR schedule at step t and the optimizer, and answers every pending push
//      with the new values. A push of the wrong range or size, for another
//      step, or twice in a step is refused naming the worker and the range.
//      With `backup_workers` b (Chen et al., 2016), step t is applied once N - b pushes of it
//      arrived (the first N - b in arrival order, summed in rank order); a push of step t that
//      comes after that is dropped (counted; PushReply::dropped) and answered at once with the
//      current values (step t's or newer).
//   ASP: each push is applied on arrival (its own optimizer step, the LR schedule at the
//      server's global step = its updates / N, times 1/max(1, staleness) with staleness_lr) and
//      answered at once
//      with the current values. SSP: the same, but the answer is held (SspGate) until the
//      slowest worker is at most `staleness` steps behind; held answers go from the loop thread
//      when a push or a goodbye moves the slowest worker on.
//   The staleness of a push: the server's updates applied since the values that worker last
//   received (Zhang et al.'s tau); its lead: the steps it is ahead of the slowest worker.
//   Compressed pushes (o_.compression, push_codec.h): each worker's message is decoded
//   separately (BSP: into that worker's gradient, then summed in rank order as above; ASP/SSP:
//   into the gradient applied); a push in another codec or of another size is refused naming
//   the worker and the range.
//   4. each worker says bye; wait() returns once all N did.
// A worker that leaves without bye makes wait() throw naming it, at once or, with
// `rejoin_timeout`, if it does not come back within it: a worker restarted alone says hello
// again and resumes at its next step (BSP: the step being gathered, its unanswered push
// forgotten; ASP/SSP: its clock); meanwhile SSP does not wait for it and BSP with backup
// workers goes on without it.
//
// Recovery (with ckpt_dir and ckpt_every > 0): the server checkpoints its shard, optimizer state
// and bookkeeping (server_state.h) every `ckpt_every` steps (BSP: its steps; ASP/SSP: every
// ckpt_every * N pushes) and when a worker says bye, synchronously, before answering (a write
// that fails is logged and the workers keep their pushes longer): each answer's
// PushReply::durable tells the worker which of its pushes a checkpoint holds. Workers keep the
// pushes after that (worker.h). A restarted server (restore = true) loads its newest checkpoint
// that verifies and answers each worker's hello with the step its pushes must resume from; the
// workers replay their kept pushes from there, in order. In BSP every step's update is then
// recomputed from the same N gradients, summed in rank order: the run ends bit-identical to an
// uninterrupted one.
//
// Metrics: stats() at the end; bytes in/out and the queue depth (requests waiting for an
// answer, sampled after each push) in stats().traffic, and every metrics_every_updates updates
// an interval of them to on_interval (server_metrics.h).
//
// Recovery lives in server_recovery.cc. Threads: the handlers run on the service loop thread;
// wait() on the caller's. State is under
// mu_. The update (an elementwise optimizer over the slice) runs on the loop thread.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "cohort/net/service/server.h"
#include "cohort/optim/optimizer.h"
#include "cohort/optim/schedule.h"
#include "cohort/ps/consistency.h"
#include "cohort/ps/protocol.h"
#include "cohort/ps/push_codec.h"
#include "cohort/ps/server_metrics.h"
#include "cohort/ps/server_state.h"

namespace cohort::ps {

using Millis = std::chrono::milliseconds;

struct ServerOptions {
  int index = 0;  // this server: 0..num_servers-1
  int num_servers = 1;
  int num_workers = 1;
  NamedTensors params;  // the model's parameters with their initial values (only read)
  net::Secret secret;
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
  std::string host = "127.0.0.1";
  // The optimizer over the server's slice (one 1-D tensor), and the LR schedule given the
  // run's length from the workers' hello.
  std::function<std::unique_ptr<optim::Optimizer>(optim::NamedParams)> make_optimizer;
  std::function<std::unique_ptr<optim::LrSchedule>(int64_t total_steps)> make_schedule;
  Consistency consistency;
  // The codec every worker's pushes must come in (push_codec.h); none: f32 values as before.
  PushCompression compression;
  // Accept same-host workers' shared areas (shared_area.h): their pushes and answers move
  // through shared memory, headers only on the socket. false: every worker's go through it.
  bool shared_memory = true;
  // How long a worker that left without goodbye may take to come back (above); 0: never.
  Millis rejoin_timeout{0};
  // Recovery (above). ckpt_dir empty or ckpt_every 0: no checkpoints (workers keep nothing),
  // a server failure ends the job.
  std::string ckpt_dir;
  int64_t ckpt_every = 0;
  int ckpt_keep = 3;
  bool restore = false;  // start from the newest checkpoint in ckpt_dir, if one verifies
  // A whole job resumed (set only then): which checkpoint to load instead of the newest. Given
  // those that verify, oldest first, returns the one to load (an index into them), or -1 for
  // none (start from the initial values); may throw (the servers cannot agree). Newer ones are
  // then removed (an abandoned continuation), and who said goodbye is not restored (every
  // worker starts again). BSP picks the newest step every server has
  // (train/roles/ps_server_role.cc).
  std::function<int(const std::vector<SavedCheckpoint>&)> choose_checkpoint;
  // Called on the loop thread after each update with the server's progress step (BSP: the step
  // now being gathered; ASP/SSP: pushes / N) once any due checkpoint is written: the fault seam
  // of the recovery tests (train/roles/ps_server_role.cc kills the process there).
  std::function<void(int64_t step)> after_update;
  // A ServerInterval (server_metrics.h) to on_interval every this many updates (0: none).
  // on_interval runs on the service loop thread under the server's mutex: keep it short (one
  // metrics line), and do not call back into the server.
  int64_t metrics_every_updates = 0;
  std::function<void(const ServerInterval&)> on_interval;
};

// What a server did, for its log line and metrics record at the end.
struct ServerStats {
  int64_t updates = 0;        // optimizer steps applied
  int64_t pushes = 0;         // pushes received (dropped ones included)
  int64_t dropped = 0;        // BSP with backup workers: late pushes not used
  int64_t held = 0;           // SSP: answers held back
  double seconds = 0;         // from the first push to the last update
  int64_t max_staleness = 0;  // over the pushes
  double mean_staleness = 0;
  std::vector<double> median_step_s;  // per worker: answer -> next push
  std::optional<Straggler> straggler;
  ServerTraffic traffic;  // bytes in/out, queue depth (server_metrics.h)
};

class ParamServer {
 public:
  // Starts serving. InvalidArgument for bad options (e.g. more servers than keys).
  explicit ParamServer(ServerOptions options);
  ~ParamServer();
  ParamServer(const ParamServer&) = delete;
  ParamServer& operator=(const ParamServer&) = delete;

  // Returns once every worker said bye. InvalidArgument naming the worker if one left without
  // it; Timeout if no request came for `idle_timeout`.
  void wait(Millis idle_timeout);

  const std::string& address() const;
  KeyRange range() const { return range_; }
  int64_t step() const;
  ServerStats stats() const;

 private:
  struct Pending {
    uint64_t peer;
    uint64_t request_id;
    PushReply reply;  // what the answer will say (held answers: filled when they go)
    std::chrono::steady_clock::time_point since;
    bool shared = false;  // the push came through the worker's shared area: so does the answer
  };
  std::optional<Bytes> on_request(const net::service::Peer& peer, uint64_t id, Bytes payload);
  void on_leave(const net::service::Peer& peer, const std::string& why);
  Bytes hello(uint64_t peer, const Bytes& payload);
  std::optional<Bytes> push(uint64_t peer, uint64_t id, const Bytes& payload);
  std::optional<Bytes> push_bsp(int rank, uint64_t peer, uint64_t id, const Push& p);
  std::optional<Bytes> push_async(int rank, uint64_t peer, uint64_t id, const Push& p);
  // Worker `rank`'s gradient of the range from its push into out (decoded when compressed).
  void read_grad(const Push& p, int rank, float* out) const;
  Bytes final_state(int rank);  // the answer to `final`
  void apply_update();          // enough pushes of step_ are in: average, optimize, answer them
  // One optimizer step of the slice with `grad` at schedule step `step`, lr / lr_divisor.
  void optimize(Tensor grad, int64_t step, double lr_divisor);
  // The answer to worker `rank`'s push: reply + the current values (into its shared area when
  // the push came through it); records what it was sent.
  Bytes answer(int rank, PushReply reply, bool shared);
  // hello's answer to a shared area offer: maps it when it can (areas_), says whether.
  uint8_t accept_shared(const Hello& h);
  void release_held();  // SSP: answers whose worker may now proceed
  void record_staleness(int64_t tau);
  // Recovery (server_state.h).
  int64_t progress() const;  // BSP: step_; ASP/SSP: version_ / N
  int64_t next_step(int rank) const;
  std::vector<int64_t> clocks() const;  // every worker's next step
  void after_update();                  // a due checkpoint, then o_.after_update
  void save_checkpoint();
  void restore_newest();
  ServerSnapshot shape() const;  // this server's job shape, what its checkpoints must match
  // o_.choose_checkpoint's pick (null: none), after removing the checkpoints newer than it.
  std::optional<ckpt::CheckpointData> load_chosen();
  void sample_after_push();  // queue depth; the interval record when one is due
  int rank_of(uint64_t peer, int32_t claimed) const;
  void check_away() const;  // throws naming a worker away longer than rejoin_timeout
  void rejoin(int rank);
  std::string who() const;

  ServerOptions o_;
  Layout layout_;
  KeyRange range_;
  Tensor shard_;  // 1-D f32 [range_.size()]: the values this server owns
  // ASP/SSP: the push being applied, copied out of the (unaligned) payload or decoded; reused,
  // not allocated per push.
  Tensor push_grad_;
  PushDecoder decoder_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<optim::LrSchedule> schedule_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<uint64_t, int> ranks_;  // peer -> worker rank, after its hello
  std::set<int> said_bye_;
  std::set<int> final_waiters_;  // said bye asking for the final values, not yet given them
  std::map<int, std::chrono::steady_clock::time_point> away_;  // left without bye, since
  // rank -> its gradient of step_, kept until all arrived so that they are summed in rank
  // order: the result does not depend on arrival order (determinism, DESIGN.md).
  std::vector<std::vector<float>> grads_;
  std::map<int, Pending> pushed_;  // BSP: rank -> its unanswered push of step_
  std::map<int, Pending> held_;    // SSP: rank -> its held answer
  // rank -> the shared area of its latest hello (shared_area.h); kept after it leaves (an
  // answer may still be on its way), replaced when it says hello again.
  std::map<int, std::unique_ptr<SharedArea>> areas_;
  int64_t step_ = 0;                   // BSP: the step being gathered
  int64_t version_ = 0;                // updates applied
  std::vector<int64_t> sent_version_;  // rank -> version of the values it last received
  SspGate gate_;
  StepIntervals intervals_;
  ServerStats stats_;
  ServerMetrics metrics_{o_.metrics_every_updates};
  double staleness_sum_ = 0;
  std::optional<std::chrono::steady_clock::time_point> first_push_;
  std::unique_ptr<ckpt::CheckpointManager> ckpt_;
  std::vector<int64_t> durable_;  // rank -> its next step in the newest checkpoint
  int64_t checkpointed_at_ = 0;   // progress() of the newest checkpoint
  int64_t saves_ = 0;             // checkpoints written (their directories' numbers)
  std::string error_;             // set once: wait() throws it
  std::chrono::steady_clock::time_point last_activity_;

  std::unique_ptr<net::service::Server> server_;  // last: stopped first
};

}  // namespace cohort::ps
