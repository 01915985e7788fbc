#include "cohort/launch/launcher.h"

#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <memory>

#include "cohort/core/error.h"
#include "cohort/launch/attempt.h"
#include "cohort/launch/child_process.h"
#include "cohort/launch/signal_relay.h"
#include "cohort/launch/torch_env.h"
#include "cohort/rendezvous/tcp_store_server.h"

namespace cohort::launch {
namespace {

using cohort::detail::str;
using detail::JobPlan;

// How long the launcher of a node other than 0 waits for node 0 to publish MASTER_PORT
// (torch_env.h): as long as a worker waits for the store by default (TcpStoreOptions).
constexpr std::chrono::milliseconds kTorchPortWait = std::chrono::seconds(300);

// "ADDR:PORT" or "[IPv6]:PORT". InvalidArgument naming the value otherwise.
std::pair<std::string, uint16_t> parse_master(const std::string& master) {
  const std::string usage =
      str("cohort run: --master '", master, "' is not ADDR:PORT (e.g. 10.0.0.1:29500)");
  size_t colon = master.rfind(':');
  COHORT_CHECK_ARG(colon != std::string::npos && colon > 0 && colon + 1 < master.size(), usage);
  std::string host = master.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  COHORT_CHECK_ARG(!host.empty(), usage);
  int port = -1;
  const char* first = master.data() + colon + 1;
  const char* last = master.data() + master.size();
  auto [end, ec] = std::from_chars(first, last, port);
  COHORT_CHECK_ARG(ec == std::errc() && end == last && port >= 0 && port <= 65535, usage,
                   ": the port must be a number in 0..65535");
  return {host, static_cast<uint16_t>(port)};
}

void validate(const LaunchOptions& o) {
  COHORT_CHECK_ARG(!o.command.empty() && !o.command[0].empty(),
                   "cohort run: no program given: usage `cohort run -n N -- PROGRAM ARGS...`");
  COHORT_CHECK_ARG(o.nproc_per_node >= 1, "cohort run: -n (workers per node) must be >= 1, got ",
                   o.nproc_per_node);
  COHORT_CHECK_ARG(o.nnodes >= 1, "cohort run: --nnodes must be >= 1, got ", o.nnodes);
  COHORT_CHECK_ARG(o.node_rank >= 0 && o.node_rank < o.nnodes, "cohort run: --node-rank ",
                   o.node_rank, " is out of range for --nnodes ", o.nnodes, " (expected 0..",
                   o.nnodes - 1, ")");
  COHORT_CHECK_ARG(o.max_restarts >= 0, "cohort run: --max-restarts must be >= 0, got ",
                   o.max_restarts);
  // Across nodes every launcher restarts its workers, the others once node 0 published the
  // next attempt (torch_env.h); a parameter server restarted alone is one node's business.
  COHORT_CHECK_ARG(o.max_restarts == 0 || o.nnodes == 1 || o.num_servers == 0,
                   "cohort run: --max-restarts with --servers is supported on a single node "
                   "only for now (--nnodes ",
                   o.nnodes, ")");
  COHORT_CHECK_ARG(o.num_servers >= 0, "cohort run: --servers must be >= 0, got ", o.num_servers);
  COHORT_CHECK_ARG(o.stop_grace.count() >= 0, "cohort run: stop_grace must be >= 0 ms, got ",
                   o.stop_grace.count());
  COHORT_CHECK_ARG(o.nnodes == 1 || !o.master.empty(), "cohort run: --nnodes ", o.nnodes,
                   " needs --master ADDR:PORT (the address node 0 hosts the store on, the "
                   "same on every node)");
  for (const auto& [k, v] : o.extra_env) {
    COHORT_CHECK_ARG(!k.empty() && k.find('=') == std::string::npos,
                     "cohort run: bad environment variable name '", k, "' in extra_env");
  }
}

JobPlan make_plan(const LaunchOptions& o) {
  JobPlan plan;
  plan.base_env = rendezvous::snapshot_environment();
  // Multi-node: every node needs the same secret, so it cannot be generated here.
  plan.secret = !o.secret.empty()
                    ? o.secret
                    : rendezvous::secret_from_env(plan.base_env, net::SecretPolicy::kAllowInsecure);
  if (plan.secret.empty()) {
    COHORT_CHECK_ARG(o.nnodes == 1, "cohort run: --nnodes ", o.nnodes,
                     " needs a job secret shared by all nodes: set COHORT_JOB_SECRET (hex, e.g. "
                     "from `openssl rand -hex 32`) or COHORT_JOB_SECRET_FILE to the same value "
                     "on every node");
    plan.secret = net::Secret::generate();
  }
  // Workers get the secret as COHORT_JOB_SECRET; bootstrap refuses both variables at once.
  plan.base_env.erase("COHORT_JOB_SECRET_FILE");
  for (const auto& [k, v] : o.extra_env) plan.base_env[k] = v;
  if (o.master.empty()) {
    plan.store_host = "127.0.0.1";
  } else {
    auto [host, port] = parse_master(o.master);
    COHORT_CHECK_ARG(o.nnodes == 1 || port != 0, "cohort run: --master '", o.master,
                     "': a multi-node job needs a fixed port (other nodes cannot learn an "
                     "OS-chosen one)");
    plan.store_host = host;
    plan.store_port = port;
  }
  plan.host_store = o.node_rank == 0;
  return plan;
}

// The store of one attempt, if this node hosts it (node_rank 0); bound to the master address.
// A --master the store cannot listen on is the user's choice, so the error names the option and
// what to do rather than only the socket's complaint.
std::unique_ptr<rendezvous::TcpStoreServer> start_store(const LaunchOptions& o,
                                                        const JobPlan& plan) {
  if (!plan.host_store) return nullptr;
  try {
    return std::make_unique<rendezvous::TcpStoreServer>(rendezvous::TcpStoreServerOptions{
        .host = plan.store_host, .port = plan.store_port, .secret = plan.secret});
  } catch (const IoError& e) {
    if (o.master.empty()) throw;
    if (std::string(e.what()).find(strerror(EADDRINUSE)) != std::string::npos)
      throw IoError(str("cohort run: --master ", o.master,
                        " is in use: another program (an earlier job's store?) listens on that "
                        "port; choose another PORT",
                        o.nnodes == 1 ? ", or leave --master out to let the OS pick a free one"
                                      : " (the same on every node)",
                        " (", e.what(), ")"));
    throw IoError(str("cohort run: cannot host the store on --master ", o.master, ": ", e.what(),
                      "; ADDR must be an address of this machine (node 0)"));
  }
}

std::string failure_summary(const std::string& who, int status) {
  return WIFSIGNALED(status) ? str(who, " was killed by ", detail::describe_status(status))
                             : str(who, " exited with ", detail::describe_status(status));
}

// The flight recorder's verdict after a failed attempt, each line tagged as the launcher's.
void print_flight_report(const std::string& report) {
  size_t from = 0;
  while (from < report.size()) {
    size_t end = report.find('\n', from);
    if (end == std::string::npos) end = report.size();
    std::fprintf(stderr, "cohort run: %s\n", report.substr(from, end - from).c_str());
    from = end + 1;
  }
  std::fflush(stderr);
}

}  // namespace

LaunchResult run(const LaunchOptions& options) {
  validate(options);
  const JobPlan plan = make_plan(options);
  detail::SignalRelay relay;
  LaunchResult result;
  std::unique_ptr<rendezvous::TcpStoreServer> server;
  int used = 0;  // restarts of the job plus parameter servers restarted alone
  for (int restart = 0;; ++restart) {
    // A fresh server per attempt, so workers never see keys of the previous attempt. It is
    // created while the previous one still holds its port, so an OS-chosen port always
    // differs: a worker of the old attempt cannot reach the new store by accident.
    // A fixed --master port cannot be bound twice: the previous store lets go of it first.
    if (plan.store_port != 0) server.reset();
    std::unique_ptr<rendezvous::TcpStoreServer> next = start_store(options, plan);
    server = std::move(next);
    const uint16_t port = server ? server->port() : plan.store_port;
    int signal = 0;
    const uint16_t torch_port =
        detail::agree_torch_port(options, plan, port, restart, relay, kTorchPortWait, &signal);
    if (signal != 0) {
      result.exit_code = 128 + signal;
      result.message = str("received ", detail::signal_name(signal),
                           " while waiting for node 0; no worker was started");
      return result;
    }
    detail::Attempt attempt(options, plan, restart, port, torch_port, relay,
                            options.num_servers > 0 ? options.max_restarts - used : 0);
    if (server) attempt.set_store_clients([&server] { return server->stats().open; });
    detail::AttemptOutcome out = attempt.run();
    used += out.server_restarts;
    result.restarts = used;
    print_flight_report(out.flight_report);
    const std::string unreaped =
        out.unreaped.empty() ? "" : str("; still running after SIGKILL: ", out.unreaped);
    if (out.signal != 0) {
      result.exit_code = 128 + out.signal;
      result.message =
          str("received ", detail::signal_name(out.signal), "; stopped all workers", unreaped);
      return result;
    }
    if (out.failed_rank < 0) {
      result.message =
          str("all ", options.nproc_per_node, " workers exited successfully", unreaped);
      return result;
    }
    const int world = options.nnodes * options.nproc_per_node;
    const bool server = out.failed_rank >= world;  // servers follow the workers (attempt.h)
    const std::string who =
        server ? str("server ", out.failed_rank - world) : str("rank ", out.failed_rank);
    const std::string why = failure_summary(who, out.status);
    // A parameter-server job restarts its processes alone, inside the attempt (attempt.h).
    if (used < options.max_restarts && options.num_servers == 0) {
      ++used;
      std::fprintf(stderr,
                   "cohort run: rank %d failed (%s); restarting all workers (restart %d "
                   "of %d)\n",
                   out.failed_rank, detail::describe_status(out.status).c_str(), used,
                   options.max_restarts);
      std::fflush(stderr);
      if (options.on_event)
        options.on_event("restart", str(why, "; restarting all workers (restart ", used, " of ",
                                        options.max_restarts, ")"));
      continue;
    }
    result.exit_code = detail::exit_code_of(out.status);
    if (server) {
      result.failed_server = out.failed_rank - world;
    } else {
      result.failed_rank = out.failed_rank;
    }
    const std::string restarts =
        options.max_restarts > 0 ? str(" (restarts used: ", used, " of ", options.max_restarts, ")")
                                 : std::string();
    result.message = str(why, restarts, "; last lines of ", who, ":\n", out.tail, unreaped);
    return result;
  }
}

std::string self_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
  COHORT_CHECK_IO(n > 0 && n < static_cast<ssize_t>(sizeof buf),
                  "cannot read /proc/self/exe to find the running executable: ",
                  n < 0 ? strerror(errno) : "path too long");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace cohort::launch
