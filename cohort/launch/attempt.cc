#include "cohort/launch/attempt.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cohort/core/error.h"
#include "cohort/launch/elastic_notice.h"
#include "cohort/launch/flight_verdict.h"
#include "cohort/launch/torch_env.h"

namespace cohort::launch::detail {

using std::chrono::milliseconds;

// After SIGKILL, how long reaping may take (a process in uninterruptible sleep) before the
// launcher gives up on it and says so.
constexpr milliseconds kKillReapDeadline{10'000};
// After every worker exited, how long to keep reading pipes that a worker's own children may
// still hold (they were just SIGKILLed with the group, so this is normally instant).
constexpr milliseconds kFinalDrainDeadline{1'000};
// Poll period of the watch loop: a worker exit closes its pipes and wakes poll at once; the
// period only bounds the latency when a worker's children keep its pipes open.
constexpr milliseconds kWatchPeriod{50};
constexpr milliseconds kStopPeriod{10};
// How long, after a worker exits with an error, the launcher keeps looking for one killed by a
// signal before stopping the rest (see watch()).
constexpr milliseconds kRootCauseWindow{500};

// A worker, or a parameter server: those follow the workers, with rank world + index.
Attempt::Attempt(const LaunchOptions& options, const JobPlan& plan, int restart, uint16_t port,
                 uint16_t torch_port, SignalRelay& relay, int restarts_left)
    : options_(options),
      plan_(plan),
      restart_(restart),
      restarts_left_(restarts_left),
      port_(port),
      torch_port_(torch_port),
      relay_(relay) {}

Attempt::~Attempt() {
  // Normally finish() already reaped everyone; this covers an exception mid-spawn.
  if (any_running()) {
    signal_all(SIGKILL);
    wait_exits(Clock::now() + kKillReapDeadline, Patience::kFull);
  }
  for (auto& w : workers_) {
    if (w->proc.out_fd >= 0) ::close(w->proc.out_fd);
    if (w->proc.err_fd >= 0) ::close(w->proc.err_fd);
  }
}

AttemptOutcome Attempt::run() {
  const int world = options_.nnodes * options_.nproc_per_node;
  if (options_.nnodes > 1) {
    int local_servers = 0;
    for (int i = options_.node_rank; i < options_.num_servers; i += options_.nnodes)
      ++local_servers;
    const std::string servers =
        local_servers > 0 ? cohort::detail::str(" and ", local_servers, " parameter server",
                                                local_servers == 1 ? "" : "s")
                          : "";
    std::fprintf(stderr, "cohort run: %d workers%s on node %d of %d (world size %d), store %s:%u\n",
                 options_.nproc_per_node, servers.c_str(), options_.node_rank, options_.nnodes,
                 world, plan_.store_host.c_str(), unsigned{port_});
  } else {
    const std::string servers =
        options_.num_servers > 0
            ? cohort::detail::str(" and ", options_.num_servers, " parameter server",
                                  options_.num_servers == 1 ? "" : "s")
            : "";
    std::fprintf(stderr, "cohort run: %d worker%s%s, store %s:%u\n", world, world == 1 ? "" : "s",
                 servers.c_str(), plan_.store_host.c_str(), unsigned{port_});
  }
  std::fflush(stderr);
  make_flight_dir();
  spawn_all();
  watch();
  judge_lost_node();
  if (any_running()) stop(outcome_.signal ? outcome_.signal : SIGTERM);
  finish();
  read_flight_records();
  return outcome_;
}

void Attempt::make_flight_dir() {
  namespace fs = std::filesystem;
  auto base = plan_.base_env.find("COHORT_FLIGHT_DIR");
  if (base != plan_.base_env.end() && !base->second.empty()) {
    flight_dir_ = cohort::detail::str(base->second, "/attempt-", restart_);
    std::error_code ec;
    fs::create_directories(flight_dir_, ec);
    COHORT_CHECK_IO(!ec, "cohort run: cannot create the flight recorder directory ", flight_dir_,
                    " (from COHORT_FLIGHT_DIR): ", ec.message());
    // Records of an earlier launch into the same directory (a rerun of the same run name)
    // would be read as this attempt's: a rank that writes none must not seem to have written.
    for (const auto& f : fs::directory_iterator(flight_dir_, ec))
      if (f.path().filename().string().rfind("rank", 0) == 0) fs::remove(f.path(), ec);
    return;
  }
  auto tmp = plan_.base_env.find("TMPDIR");
  std::string pattern =
      (tmp != plan_.base_env.end() && !tmp->second.empty() ? tmp->second : std::string("/tmp")) +
      "/cohort-flight-XXXXXX";
  COHORT_CHECK_IO(::mkdtemp(pattern.data()) != nullptr, "cohort run: cannot create ", pattern,
                  " for the flight recorder: ", strerror(errno));
  flight_dir_ = pattern;
  flight_dir_temporary_ = true;
}

// After a failure, the verdict over this node's workers (servers keep no ring).
void Attempt::read_flight_records() {
  if (outcome_.failed_rank >= 0) {
    std::vector<int> ranks;
    for (auto& w : workers_)
      if (w->local_rank >= 0) ranks.push_back(w->rank);
    FlightVerdict v = cohort::launch::read_flight_records(flight_dir_, ranks);
    if (v.any_record()) {
      outcome_.flight_report = v.format(flight_dir_);
      return;  // the records stay for the user
    }
  }
  // Nothing to keep: our temporary directory goes, and so does an empty attempt-<k> made in
  // COHORT_FLIGHT_DIR (remove() leaves a non-empty one alone); then its parent, if empty.
  std::error_code ec;
  if (flight_dir_temporary_) {
    std::filesystem::remove_all(flight_dir_, ec);
  } else if (std::filesystem::remove(flight_dir_, ec)) {
    std::filesystem::remove(std::filesystem::path(flight_dir_).parent_path(), ec);
  }
}

namespace {

std::vector<std::string> env_list(const rendezvous::EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

// What every process of the attempt gets: the store and the secret.
rendezvous::EnvMap Attempt::job_env() const {
  rendezvous::EnvMap env = plan_.base_env;
  auto set = [&env](const char* k, const auto& v) { env[k] = cohort::detail::str(v); };
  set("COHORT_MASTER_ADDR", plan_.store_host);
  set("COHORT_MASTER_PORT", port_);
  set("COHORT_JOB_SECRET", plan_.secret.to_hex());
  set("COHORT_STORE_EXTERNAL", 1);
  set("COHORT_RESTART_COUNT", restart_);
  set("COHORT_FLIGHT_DIR", flight_dir_);
  if (options_.num_servers > 0) set("COHORT_NUM_SERVERS", options_.num_servers);
  return env;
}

std::vector<std::string> Attempt::server_env(int index, int restarts) const {
  rendezvous::EnvMap env = job_env();
  auto set = [&env](const char* k, const auto& v) { env[k] = cohort::detail::str(v); };
  set("COHORT_ROLE", "server");
  set("COHORT_SERVER_INDEX", index);
  set("COHORT_SERVER_RESTARTS", restarts);
  set("COHORT_NNODES", options_.nnodes);
  set("COHORT_NUM_WORKERS", options_.nnodes * options_.nproc_per_node);
  return env_list(env);
}

std::vector<std::string> Attempt::worker_env(int local_rank, int restarts) const {
  rendezvous::EnvMap env = job_env();
  auto set = [&env](const char* k, const auto& v) { env[k] = cohort::detail::str(v); };
  if (restarts > 0) set("COHORT_WORKER_RESTARTS", restarts);
  if (restarts > 0 && (options_.elastic_respawn || options_.elastic_min_nodes > 0))
    set("COHORT_ELASTIC_JOIN", 1);
  set("COHORT_RANK", options_.node_rank * options_.nproc_per_node + local_rank);
  set("COHORT_WORLD_SIZE", options_.nnodes * options_.nproc_per_node);
  set("COHORT_LOCAL_RANK", local_rank);
  set("COHORT_LOCAL_WORLD_SIZE", options_.nproc_per_node);
  set("COHORT_NODE_RANK", options_.node_rank);
  add_torch_env(env, options_, plan_, local_rank, restart_, torch_port_);
  return env_list(env);
}

void Attempt::spawn_all() {
  cpus_ = worker_cpus(options_.bind, options_.nproc_per_node, usable_cpus());
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    const int rank = options_.node_rank * options_.nproc_per_node + local;
    const std::string tag = cohort::detail::str("[rank ", rank, "] ");
    workers_.push_back(std::make_unique<Worker>(rank, local, options_.tag_output ? tag : ""));
    spawn_worker(*workers_.back(), local, 0);
  }
  const int world = options_.nnodes * options_.nproc_per_node;
  // Server i runs on node i % nnodes (spread over the nodes); not pinned: they mostly wait.
  for (int i = options_.node_rank; i < options_.num_servers; i += options_.nnodes) {
    const std::string tag = cohort::detail::str("[server ", i, "] ");
    workers_.push_back(std::make_unique<Worker>(world + i, -1, options_.tag_output ? tag : ""));
    spawn_server(*workers_.back(), i, 0);
  }
}

void Attempt::spawn_worker(Worker& w, int local_rank, int restarts) {
  const int cpu = cpus_.empty() ? -1 : cpus_[size_t(local_rank)];
  w.proc = spawn_child(SpawnSpec{options_.command, worker_env(local_rank, restarts), cpu});
  w.running = true;
  w.status = 0;
  w.restarts = restarts;
}

void Attempt::spawn_server(Worker& w, int index, int restarts) {
  w.proc = spawn_child(SpawnSpec{options_.command, server_env(index, restarts), -1});
  w.running = true;
  w.status = 0;
  w.restarts = restarts;
}

bool Attempt::restart_alone(Worker& w) {
  // Only a death by a signal (kill -9, a crash, the OOM killer): an error exit is the
  // process's own verdict (a worker that never rejoined, a bad config), final.
  if (options_.num_servers == 0 || restarts_left_ <= 0 || !WIFSIGNALED(w.status)) return false;
  const int world = options_.nnodes * options_.nproc_per_node;
  const bool server = w.rank >= world;
  // A worker is restarted only while every local server still runs: once one has finished,
  // there is nothing left to rejoin.
  for (auto& other : workers_)
    if (!server && other->rank >= world && !other->running) return false;
  --restarts_left_;
  ++outcome_.server_restarts;
  const std::string who = server ? cohort::detail::str("parameter server ", w.rank - world)
                                 : cohort::detail::str("rank ", w.rank);
  const std::string how = cohort::detail::str(
      WIFSIGNALED(w.status) ? "was killed by " : "exited with ", describe_status(w.status));
  std::fprintf(stderr, "cohort run: %s %s; restarting it alone (%s restart %d), %s\n", who.c_str(),
               how.c_str(), server ? "server" : "worker", w.restarts + 1,
               server ? "the workers wait for it" : "it rejoins where the servers are");
  std::fflush(stderr);
  w.out.flush();  // its last partial line, before the new process writes
  w.err.flush();
  for (int* fd : {&w.proc.out_fd, &w.proc.err_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  signal_group(w.proc.pid, SIGKILL);  // its own children, if any
  if (server) {
    spawn_server(w, w.rank - world, w.restarts + 1);
  } else {
    spawn_worker(w, w.local_rank, w.restarts + 1);
  }
  return true;
}

bool Attempt::leave_behind(Worker& w) {
  const int world = options_.nnodes * options_.nproc_per_node;
  if (options_.elastic_min_workers <= 0 || w.rank >= world) return false;
  const std::string how = cohort::detail::str(
      WIFSIGNALED(w.status) ? "was killed by " : "exited with ", describe_status(w.status));
  if (chief_done_) {  // a dropped worker, stopped once the job was done
    ++outcome_.left_behind;
    return true;
  }
  // Several nodes: an error exit is the worker's verdict (the job stops, or it was dropped), the
  // node fails with it; a death is left behind. The workers' round counts every node's.
  if (options_.nnodes > 1 && !WIFSIGNALED(w.status)) return false;
  int running = 0;
  for (auto& other : workers_) running += other->running && other->rank < world;
  if (options_.nnodes == 1 && running < options_.elastic_min_workers) {
    std::fprintf(stderr,
                 "cohort run: rank %d %s; elastic: only %d worker(s) would be left, fewer than "
                 "elastic.min_workers = %d: the job stops\n",
                 w.rank, how.c_str(), running, options_.elastic_min_workers);
    std::fflush(stderr);
    return false;
  }
  ++outcome_.left_behind;
  if (lost_rank_ < 0) lost_rank_ = w.rank, lost_status_ = w.status;
  announce_left_behind(plan_.store_host, port_, plan_.secret, restart_, w.rank, how);
  // Rank 0 is not respawned: the lowest member took over as rank 0 (docs/elastic.md).
  const bool respawn = options_.elastic_respawn && w.rank != 0;
  // Several nodes: this launcher sees its own workers only.
  const std::string going_on =
      options_.nnodes == 1 ? cohort::detail::str(running, " worker(s) go on without it")
                           : cohort::detail::str(running, " worker(s) of node ", options_.node_rank,
                                                 " and the other nodes' go on without it");
  std::fprintf(stderr, "cohort run: rank %d %s; elastic: %s (elastic.min_workers = %d)%s\n", w.rank,
               how.c_str(), going_on.c_str(), options_.elastic_min_workers,
               respawn       ? "; respawning it to join them"
               : w.rank == 0 ? "; the lowest of them takes over as rank 0"
                             : "");
  std::fflush(stderr);
  if (respawn) respawn_to_join(w);
  return true;
}

void Attempt::respawn_to_join(Worker& w) {
  w.out.flush();  // its last partial line, before the new process writes
  w.err.flush();
  for (int* fd : {&w.proc.out_fd, &w.proc.err_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  signal_group(w.proc.pid, SIGKILL);  // its own children, if any
  spawn_worker(w, w.local_rank, w.restarts + 1);
}

// The job is done once its rank 0 exited with 0 (launcher rank 0, or the worker that took over
// as rank 0: the store's chief key, read once a worker finished); what still runs was dropped.
void Attempt::stop_dropped_after_chief() {
  if (options_.elastic_min_workers <= 0 || chief_done_) return;
  const int world = options_.nnodes * options_.nproc_per_node;
  auto finished = [](const Worker& w) {
    return !w.running && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
  };
  if (chief_rank_ < 0) {
    const bool any = std::any_of(workers_.begin(), workers_.end(),
                                 [&](auto& w) { return w->rank < world && finished(*w); });
    if (!any) return;
    chief_rank_ = elastic_chief(plan_.store_host, port_, plan_.secret, restart_);
  }
  for (auto& w : workers_)
    if (w->rank == chief_rank_ && finished(*w)) chief_done_ = Clock::now();
}

bool Attempt::any_running() const {
  return std::any_of(workers_.begin(), workers_.end(), [](auto& w) { return w->running; });
}

bool Attempt::any_fd_open() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](auto& w) { return w->proc.out_fd >= 0 || w->proc.err_fd >= 0; });
}

void Attempt::signal_all(int sig) {
  // Groups of exited workers too: their own children may still be alive.
  for (auto& w : workers_) signal_group(w->proc.pid, sig);
}

// Runs until the first failure, a signal to the launcher, or every worker exited cleanly.
void Attempt::watch() {
  while ((any_running() || cut_off_since_ || serving_the_others()) && outcome_.failed_rank < 0 &&
         outcome_.signal == 0) {
    pump(kWatchPeriod);
    reap();
    poll_rejoin();
    stop_dropped_after_chief();
    // Workers an elastic job dropped (stopped, cut off) do not end by themselves.
    if (chief_done_ && Clock::now() - *chief_done_ > options_.stop_grace) signal_all(SIGKILL);
  }
  // A worker that exited with an error has often only noticed a peer that was killed: that
  // peer is the cause to name. The killed one's death can reach waitpid a moment later (its
  // address space takes time to tear down, while the survivor saw its sockets close), so look
  // a little longer before stopping the others.
  const auto until = Clock::now() + kRootCauseWindow;
  while (outcome_.failed_rank >= 0 && !WIFSIGNALED(outcome_.status) && outcome_.signal == 0 &&
         any_running() && Clock::now() < until) {
    pump(kStopPeriod);
    reap();
  }
}

// SIGTERM (or the signal the launcher got) to every group, SIGKILL after the grace period.
// SIGCONT follows: a stopped worker (SIGSTOP, a debugger detached badly) would otherwise hold
// the SIGTERM pending and only the SIGKILL, a whole grace later, would end it.
void Attempt::stop(int sig) {
  stopping_ = true;
  signal_all(sig);
  signal_all(SIGCONT);
  wait_exits(Clock::now() + options_.stop_grace, Patience::kUntilEscalated);
  if (any_running()) {
    signal_all(SIGKILL);
    wait_exits(Clock::now() + kKillReapDeadline, Patience::kFull);
  }
}

void Attempt::wait_exits(Clock::time_point deadline, Patience patience) {
  while (any_running() && !(patience == Patience::kUntilEscalated && escalate_)) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) return;
    pump(std::min(left, kStopPeriod));
    reap();
  }
}

// Everyone is reaped (or given up on): kill stragglers in the groups, read what is left in
// the pipes, print partial last lines, record the failed rank's tail.
void Attempt::finish() {
  signal_all(SIGKILL);
  const auto deadline = Clock::now() + kFinalDrainDeadline;
  while (any_fd_open() && Clock::now() < deadline) pump(kStopPeriod);
  for (auto& w : workers_) {
    drain(w->proc.out_fd, w->out);
    drain(w->proc.err_fd, w->err);
    w->out.flush();
    w->err.flush();
    if (w->rank == outcome_.failed_rank) outcome_.tail = w->tail.indented();
    if (w->running) {
      outcome_.unreaped += cohort::detail::str(outcome_.unreaped.empty() ? "" : ", ", "rank ",
                                               w->rank, " (pid ", w->proc.pid, ")");
    }
  }
}

// Waits up to `timeout` for output or a signal, then handles whatever is ready.
void Attempt::pump(milliseconds timeout) {
  std::vector<pollfd> fds{{relay_.fd(), POLLIN, 0}};
  for (auto& w : workers_) {
    if (w->proc.out_fd >= 0) fds.push_back({w->proc.out_fd, POLLIN, 0});
    if (w->proc.err_fd >= 0) fds.push_back({w->proc.err_fd, POLLIN, 0});
  }
  int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n <= 0) return;  // timeout, or EINTR: the caller loops
  if (fds[0].revents) {
    while (int sig = relay_.take()) {
      if (outcome_.signal == 0) {
        outcome_.signal = sig;
      } else {
        escalate_ = true;  // impatient second signal: do not wait for the grace period
        signal_all(SIGKILL);
      }
    }
  }
  for (auto& w : workers_) {
    drain(w->proc.out_fd, w->out);
    drain(w->proc.err_fd, w->err);
  }
}

// Reads everything available on fd (non-blocking) into relay; closes fd at EOF.
void Attempt::drain(int& fd, LineRelay& relay) {
  char buf[16384];
  while (fd >= 0) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      relay.feed(std::string_view(buf, static_cast<size_t>(n)));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {  // EOF or a real error: this stream is done
      relay.flush();
      ::close(fd);
      fd = -1;
    }
  }
}

void Attempt::reap() {
  // Among the workers found dead before the others are stopped, one killed by a signal is the
  // likelier cause: its peers then fail with a communication error naming it, often before the
  // launcher looks.
  for (auto& w : workers_) {
    if (!w->running) continue;
    int status = 0;
    pid_t r = ::waitpid(w->proc.pid, &status, WNOHANG);
    if (r == 0) continue;
    if (r < 0 && errno == EINTR) continue;
    w->running = false;
    w->status = status;
    // r < 0 (ECHILD: someone else reaped it, e.g. a SIGCHLD=SIG_IGN setting): treat as failed.
    if (r < 0) w->status = 0xff00;  // exit code 255
    // Read what it wrote before exiting, so that its last lines are complete.
    drain(w->proc.out_fd, w->out);
    drain(w->proc.err_fd, w->err);
    const bool failed = !(WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0);
    if (!failed || stopping_ || outcome_.signal != 0) continue;
    if (outcome_.failed_rank < 0 && restart_alone(*w)) continue;
    if (outcome_.failed_rank < 0 && cut_off_from_store(*w)) continue;
    if (outcome_.failed_rank < 0 && leave_behind(*w)) continue;
    bool signaled_over_exit =
        outcome_.failed_rank >= 0 && WIFSIGNALED(w->status) && !WIFSIGNALED(outcome_.status);
    if (outcome_.failed_rank < 0 || signaled_over_exit) {
      outcome_.failed_rank = w->rank;
      outcome_.status = w->status;
    }
  }
}

}  // namespace cohort::launch::detail
