#pragma once
// The launcher behind `cohort run` (our torchrun): starts N copies of a program on this node,
// hands each its place in the job through the environment, tags their output by rank, and
// turns the first failure into a clean stop of the whole job (or a restart).
//
// Protocol of one attempt:
//   1. Store: single node (nnodes == 1) -> this launcher starts a TcpStoreServer on
//      127.0.0.1, port 0 (or on `master` when given) with the job secret. Multi-node -> the
//      launcher of node_rank 0 hosts it on `master`, the others host nothing. Every restart
//      attempt gets a FRESH server (a new port when the OS picks it), so workers of attempt k
//      never see keys left behind by attempt k-1.
//   2. Spawn: each worker is fork+execvp'ed with, on top of the launcher's environment,
//        COHORT_RANK (= node_rank * nproc_per_node + local rank), COHORT_WORLD_SIZE
//        (= nnodes * nproc_per_node), COHORT_LOCAL_RANK, COHORT_LOCAL_WORLD_SIZE,
//        COHORT_NODE_RANK, COHORT_MASTER_ADDR, COHORT_MASTER_PORT, COHORT_JOB_SECRET (hex),
//        COHORT_STORE_EXTERNAL=1 (connect with rendezvous::StoreHost::kExternal) and
//        COHORT_RESTART_COUNT (0 on the first attempt, then 1, 2, ...), COHORT_FLIGHT_DIR (where
//        ranks write their flight recorder when a collective fails: a directory per attempt,
//        docs/monitoring.md); and torchrun's
//        RANK, WORLD_SIZE, LOCAL_RANK, ..., MASTER_ADDR and a MASTER_PORT of its own
//        (torch_env.h: node 0 picks it; other nodes read it from the store first).
//      COHORT_JOB_SECRET_FILE is removed (bootstrap refuses both at once). stdin is /dev/null:
//      workers run in their own process groups, where reading a terminal would stop them.
//   3. Watch: a poll loop forwards each worker's stdout/stderr line by line ("[rank R] "
//      prefix unless tag_output is false) and reaps exits with waitpid(WNOHANG) on the
//      workers' own pids only (other children of the process are left alone).
//   4. Stop: the first worker to exit non-zero or by a signal is the failed rank. Every other
//      worker's process group gets SIGTERM and SIGCONT (a stopped worker runs to take it),
//      then SIGKILL after stop_grace; all are reaped. If workers wrote flight records, the
//      launcher prints their verdict (flight_verdict.h): which rank is behind, at which call.
//      SIGINT/SIGTERM received by the launcher are forwarded the same way (a second one
//      escalates to SIGKILL at once) and the result is 128 + signal.
//   5. Restart: with restarts left (single node only), print why and go back to 1. A failed
//      parameter server is restarted alone inside the attempt instead (attempt.h).
//
// No orphans: workers set PR_SET_PDEATHSIG=SIGKILL (the launcher dying kills them) and lead
// their own process group, which the launcher signals as a whole, so a worker's own children
// go too. At the end of every attempt each group gets a final SIGKILL for stragglers.
//
// Process-wide effects while run() is active: SIGINT and SIGTERM handlers (sigaction + a
// self-pipe; the previous handlers are restored on return). Hence one run() at a time per
// process; a second concurrent call throws InvalidArgument.
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cohort/launch/binding.h"
#include "cohort/net/secret.h"

namespace cohort::launch {

struct LaunchOptions {
  std::vector<std::string> command;  // program and its arguments (execvp: PATH lookup)
  int nproc_per_node = 1;            // workers started by this launcher
  int nnodes = 1;
  int node_rank = 0;
  std::string master;  // "ADDR:PORT" of the store; empty: single node, this
                       // launcher hosts it on 127.0.0.1 with an OS-chosen port
  // Restart all local workers after a failure, K times. With parameter servers: a failed server
  // restarts alone (the workers run on and wait for it); a failed worker ends the job.
  int max_restarts = 0;
  // Elastic training (docs/elastic.md): > 0, a worker other than rank 0 that fails is left
  // behind while at least this many workers still run, and the others go on in place (they
  // re-form their group themselves). Once rank 0 has finished cleanly, workers still running
  // (dropped ones: stopped, or cut off) are killed after stop_grace and do not fail the job.
  int elastic_min_workers = 0;
  // With elastic_min_workers: a worker left behind is started again at once, told to join the
  // running job (COHORT_ELASTIC_JOIN=1; train/elastic_join.h) rather than to start it.
  bool elastic_respawn = false;
  // Several nodes (`--nnodes MIN:MAX`, docs/elastic.md "Several nodes"): > 0 makes the job
  // elastic across nodes (elastic_min_workers = MIN x nproc_per_node). A node other than the
  // store's host whose workers stopped while the store was out of reach (its link was cut) waits
  // for the store, up to rejoin_timeout, and then starts its workers again to join the running
  // job (COHORT_ELASTIC_JOIN=1), as a respawn does.
  int elastic_min_nodes = 0;
  std::chrono::milliseconds rejoin_timeout = std::chrono::seconds(300);
  std::chrono::milliseconds stop_grace = std::chrono::seconds(5);  // SIGTERM -> SIGKILL
  bool tag_output = true;   // prefix each output line with "[rank R] "
  Bind bind = Bind::kAuto;  // pin local workers to cores (binding.h)
  std::vector<std::pair<std::string, std::string>> extra_env;  // added to every worker
  // Parameter servers started beside the workers; server i runs on node i % nnodes. Server i
  // gets COHORT_ROLE=server, COHORT_SERVER_INDEX=i, COHORT_NUM_SERVERS, COHORT_NUM_WORKERS and
  // the store address and job secret, but no rank: workers keep ranks 0..N-1 and a world of N
  // (and get COHORT_NUM_SERVERS). Its output is tagged "[server i] "; its failure stops the
  // job like a worker's unless restarts are left (then it restarts alone, with
  // COHORT_SERVER_RESTARTS = how often it did). Servers exit by themselves once the workers are
  // done.
  int num_servers = 0;
  // The job secret; empty: COHORT_JOB_SECRET(_FILE) of this process, else a fresh one (single
  // node). Given when something beside the launcher needs it first (the dashboard).
  net::Secret secret;
  // Told of what the job goes through, for the dashboard: kind "restart" (text: why), from the
  // launcher's thread, between attempts.
  std::function<void(const std::string& kind, const std::string& text)> on_event;
};

struct LaunchResult {
  int exit_code = 0;       // 0 on success; else the failed worker's code (128+signal if killed)
  int failed_rank = -1;    // global rank of the first worker that failed, -1 if none
  int failed_server = -1;  // or the index of the first server that failed
  int restarts = 0;        // restarts used
  std::string message;     // human summary, e.g. "rank 1 was killed by signal 9 (SIGKILL); ..."
};

// Blocks until every worker has exited. Throws InvalidArgument for bad options (and for a
// malformed COHORT_JOB_SECRET / _FILE in the launcher's environment), IoError when the store
// cannot be bound or a worker cannot be forked. A worker whose program cannot be executed
// exits 127 with the reason on its stderr, like a shell.
// Prints to stderr: "cohort run: N workers, store ADDR:PORT" at the start of each attempt and
// the reason of each restart.
LaunchResult run(const LaunchOptions& options);

// Absolute path of the running executable (/proc/self/exe), for `cohort train --workers N`,
// which relaunches itself. IoError if it cannot be read.
std::string self_executable();

}  // namespace cohort::launch
