#pragma once
// One attempt of a launch: spawn the local workers against the attempt's store,
// relay their output, stop everyone at the first failure or on SIGINT/SIGTERM, reap all.
// launcher.cc runs attempts until one succeeds or the restarts run out. Internal to launch/.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cohort/launch/child_process.h"
#include "cohort/launch/launcher.h"
#include "cohort/launch/output.h"
#include "cohort/launch/signal_relay.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::launch::detail {

// What every attempt of a job shares, derived once from LaunchOptions and the environment.
struct JobPlan {
  net::Secret secret;
  std::string store_host;       // bind address (if hosting) and COHORT_MASTER_ADDR
  uint16_t store_port = 0;      // 0: the OS picks one per attempt
  bool host_store = true;       // node_rank 0 hosts the store
  rendezvous::EnvMap base_env;  // the launcher's environment + extra_env, before COHORT_*
};

struct AttemptOutcome {
  int failed_rank = -1;     // global rank of the first failure (world + i: server i), -1 if none
  int status = 0;           // its waitpid status
  int signal = 0;           // SIGINT/SIGTERM received by the launcher, 0 if none
  std::string tail;         // last lines of the failed rank, indented
  std::string unreaped;     // workers that outlived SIGKILL + deadline (should be empty)
  int server_restarts = 0;  // processes of a parameter-server job restarted alone (below)
  int left_behind = 0;      // workers an elastic job went on without (LaunchOptions)
  // After a failure: the flight recorder's verdict over this node's workers
  // (flight_verdict.h), empty when none of them wrote a record.
  std::string flight_report;
};

class Attempt {
 public:
  // port: where this attempt's store listens (the caller started it if this node hosts it);
  // torch_port: the workers' MASTER_PORT (torch_env.h). restarts_left: in a parameter-server
  // job, how many failed processes may be restarted alone while the rest run on: a server
  // (the workers wait for it and replay, ps/worker.h) or a worker (it rejoins where the
  // servers are; its workers form no group).
  Attempt(const LaunchOptions& options, const JobPlan& plan, int restart, uint16_t port,
          uint16_t torch_port, SignalRelay& relay, int restarts_left = 0);
  ~Attempt();  // kills and reaps whatever is left if run() threw
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  AttemptOutcome run();

 private:
  struct Worker;
  using Clock = std::chrono::steady_clock;

  void spawn_all();
  rendezvous::EnvMap job_env() const;
  std::vector<std::string> worker_env(int local_rank, int restarts) const;
  std::vector<std::string> server_env(int index, int restarts) const;
  void spawn_worker(Worker& w, int local_rank, int restarts);
  void spawn_server(Worker& w, int index, int restarts);
  // A failed process of a parameter-server job with restarts left: started again alone (same
  // store; COHORT_SERVER_RESTARTS or COHORT_WORKER_RESTARTS counts its restarts). False when
  // it cannot be.
  bool restart_alone(Worker& w);
  // Elastic jobs: whether the failed worker `w` is left behind (the others go on), and the
  // workers still running once rank 0 finished cleanly, killed after the grace period.
  bool leave_behind(Worker& w);
  void stop_dropped_after_chief();
  void respawn_to_join(Worker& w);
  // Several nodes (attempt_node.cc): a worker of this node that failed while the store was out
  // of reach: the node is cut off; its workers are stopped and, once the store answers again,
  // started again to join (poll_rejoin, from the watch loop). False when the store answers.
  bool cut_off_from_store(Worker& w);
  void poll_rejoin();
  // Several nodes, elastic: every worker of this node was left behind while the job may go on
  // elsewhere. Node 0 keeps serving the store while the others' workers are connected to it;
  // then (other nodes: at once) the node fails unless the job's rank 0 marked it done.
  bool serving_the_others() const;
  void judge_lost_node();

 public:
  // Node 0: how many connections its store has open (for serving_the_others).
  void set_store_clients(std::function<uint64_t()> clients) { store_clients_ = std::move(clients); }

 private:
  void watch();
  void stop(int sig);
  // kUntilEscalated: also return early when a second signal asked to stop waiting.
  enum class Patience { kFull, kUntilEscalated };
  void wait_exits(Clock::time_point deadline, Patience patience);
  void finish();
  void pump(std::chrono::milliseconds timeout);
  static void drain(int& fd, LineRelay& relay);
  void reap();
  bool any_running() const;
  bool any_fd_open() const;
  void signal_all(int sig);
  // COHORT_FLIGHT_DIR of this attempt: <$COHORT_FLIGHT_DIR>/attempt-<k> when the launcher's
  // environment sets it (kept), else a fresh temporary directory (removed unless it holds a
  // record the verdict used).
  void make_flight_dir();
  void read_flight_records();

  const LaunchOptions& options_;
  const JobPlan& plan_;
  int restart_;
  int restarts_left_;
  uint16_t port_;
  uint16_t torch_port_;
  SignalRelay& relay_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<int> cpus_;  // local rank -> core it is pinned to (empty: none)
  AttemptOutcome outcome_;
  bool stopping_ = false;
  std::optional<std::chrono::steady_clock::time_point> chief_done_;  // rank 0 exited with 0
  int chief_rank_ = -1;  // the launcher rank that is rank 0 at the end (-1: not asked yet)
  std::optional<Clock::time_point> cut_off_since_;  // this node cannot reach the store
  Clock::time_point last_probe_;
  int lost_rank_ = -1, lost_status_ = 0;  // the first worker left behind
  std::function<uint64_t()> store_clients_;
  bool escalate_ = false;  // a second SIGINT/SIGTERM to the launcher: SIGKILL now
  std::string flight_dir_;
  bool flight_dir_temporary_ = false;
};

// One local process of the job (a worker, or a parameter server: rank >= world).
struct Attempt::Worker {
  Worker(int rank, int local_rank, const std::string& prefix)
      : rank(rank), local_rank(local_rank), out(1, prefix, &tail), err(2, prefix, &tail) {}
  int rank;
  int local_rank;
  ChildProcess proc;
  LineTail tail;
  LineRelay out;
  LineRelay err;
  bool running = false;
  int status = 0;
  int restarts = 0;  // a parameter server restarted alone
};

}  // namespace cohort::launch::detail
