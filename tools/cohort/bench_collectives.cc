// `cohort bench collectives`: the parent validates, forks the ranks (before it creates any
// thread: forking a threaded process can leave a lock held in the child), then hosts the
// authenticated TcpStore on loopback and hands its port to the ranks through pipes. Every rank
// runs the same sweep; rank 0 prints the table. See bench_collectives.h.
#include "tools/cohort/bench_collectives.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cohort/comm/collectives.h"
#include "cohort/core/error.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "tools/cohort/bench_sweep.h"

namespace cohort::cli {

size_t parse_byte_size(std::string_view text) {
  size_t i = 0;
  size_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    COHORT_CHECK_ARG(value < (size_t{1} << 50), "bench: size '", text, "' is too large");
    value = value * 10 + size_t(text[i++] - '0');
  }
  COHORT_CHECK_ARG(i > 0, "bench: size '", text, "' is not a number (e.g. 4096, 4K, 64M, 1G)");
  std::string_view suffix = text.substr(i);
  size_t mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    mult = size_t{1} << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    mult = size_t{1} << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    mult = size_t{1} << 30;
  } else {
    COHORT_CHECK_ARG(suffix.empty(), "bench: size '", text, "' has an unknown suffix '", suffix,
                     "' (use K, M or G)");
  }
  return value * mult;
}

namespace {

using std::chrono::milliseconds;

BenchPlan make_plan(const BenchCollectivesOptions& o) {
  COHORT_CHECK_ARG(o.ranks >= 1 && o.ranks <= 64, "bench collectives: -n ", o.ranks,
                   " is out of range (1 to 64 ranks)");
  COHORT_CHECK_ARG(o.iters >= 1, "bench collectives: --iters ", o.iters, " must be >= 1");
  COHORT_CHECK_ARG(o.warmup >= 0, "bench collectives: --warmup ", o.warmup, " must be >= 0");
  COHORT_CHECK_ARG(o.timeout_s >= 1, "bench collectives: --timeout ", o.timeout_s,
                   " must be >= 1 second");
  BenchPlan p;
  p.ranks = o.ranks;
  p.iters = o.iters;
  p.warmup = o.warmup;
  p.timeout = milliseconds(int64_t(o.timeout_s) * 1000);
  p.op = parse_bench_op(o.op);
  p.dtype = parse_bench_dtype(o.dtype);
  p.transport = parse_bench_transport(o.transport);
  p.algorithm = parse_bench_algorithm(o.algo, p.op);
  p.single_copy_bytes = o.single_copy == "off" ? 0 : parse_byte_size(o.single_copy);
  COHORT_CHECK_ARG(o.bind == "core" || o.bind == "none", "bench collectives: unknown --bind '",
                   o.bind, "' (core, none)");
  p.bind_to_core = o.bind == "core";
  COHORT_CHECK_ARG(o.buffers == "shared" || o.buffers == "heap",
                   "bench collectives: unknown --buffers '", o.buffers, "' (shared, heap)");
  p.shared_buffers = o.buffers == "shared";
  COHORT_CHECK_ARG(o.backend == "native" || o.backend == "mpi",
                   "bench collectives: unknown --backend '", o.backend, "' (native, mpi)");
  COHORT_CHECK_ARG(o.backend == "native" || p.algorithm == comm::Algorithm::kAuto,
                   "bench collectives: --algo ", o.algo,
                   " needs --backend native (MPI chooses its own algorithm; use auto)");
  size_t colon = o.sizes.find(':');
  std::string_view sizes = o.sizes;
  p.min_bytes = parse_byte_size(sizes.substr(0, colon));
  p.max_bytes = colon == std::string::npos ? p.min_bytes : parse_byte_size(sizes.substr(colon + 1));
  COHORT_CHECK_ARG(p.min_bytes > 0, "bench collectives: --sizes ", o.sizes,
                   ": the smallest size must be > 0");
  COHORT_CHECK_ARG(p.min_bytes <= p.max_bytes, "bench collectives: --sizes ", o.sizes, ": MIN (",
                   p.min_bytes, " bytes) is larger than MAX (", p.max_bytes, " bytes)");
  return p;
}

// A rank's life in its own process: wait for the store's port, then run the sweep.
// Pins rank r to the r-th usable CPU when every rank can have one, as mpirun does by default
// (--bind-to core for 2 ranks; with more ranks than cores it binds to the whole package, i.e.
// not at all, and so do we). Unpinned, a loaded host's scheduler often parks both ranks of a
// pair on one core, where each exchange then costs two context switches (~17 us here instead
// of ~1 us): the comparison with Open MPI would measure the scheduler, not the transport.
void bind_rank_to_cpu(int rank, int ranks) {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0 || ranks > CPU_COUNT(&set)) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set) || seen++ != rank) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)::sched_setaffinity(0, sizeof(one), &one);  // best effort: unpinned still works
    return;
  }
}

[[noreturn]] void rank_main(const BenchPlan& plan, int rank, int port_fd,
                            const net::Secret& secret) {
  int code = 1;
  if (plan.bind_to_core) bind_rank_to_cpu(rank, plan.ranks);
  try {
    uint16_t port = 0;
    if (::read(port_fd, &port, sizeof(port)) != ssize_t(sizeof(port))) {
      std::fprintf(stderr, "cohort: bench: rank %d: the parent went away before the store\n", rank);
      std::fflush(nullptr);
      ::_exit(1);
    }
    rendezvous::TcpStoreOptions so;
    so.port = port;
    so.secret = secret;
    so.timeout = plan.timeout;
    auto store = std::make_shared<rendezvous::TcpStore>(so);
    code = run_bench_rank(plan, std::move(store), rank, secret);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cohort: bench: rank %d: %s\n", rank, e.what());
  }
  std::fflush(nullptr);
  ::_exit(code);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return detail::str("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return detail::str("killed by signal ", WTERMSIG(status));
  return "stopped";
}

// Waits for every rank. Once one fails, the others have `grace` to notice (their collectives
// time out or see the peer close) before they are killed. Returns the exit code of the job.
int wait_ranks(std::vector<pid_t> pids, milliseconds grace) {
  int result = 0;
  size_t left = pids.size();
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (pids[r] == 0 || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      pids[r] = 0;
      --left;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      bool wrong = WIFEXITED(status) && WEXITSTATUS(status) == kWrongResultsExit;
      if (wrong) {  // every rank knows the total; say it once
        if (result == 0)
          std::fprintf(stderr, "cohort: error: bench collectives: wrong results (see #wrong)\n");
        result = std::max(result, kWrongResultsExit);
      } else if (!ok) {
        std::fprintf(stderr, "cohort: error: bench collectives: rank %zu failed (%s)\n", r,
                     describe_status(status).c_str());
        result = 1;
        if (!kill_at) kill_at = std::chrono::steady_clock::now() + grace;
      }
    }
    if (kill_at && std::chrono::steady_clock::now() > *kill_at) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] == 0) continue;
        std::fprintf(stderr, "cohort: error: bench collectives: rank %zu did not finish; killed\n",
                     r);
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        pids[r] = 0;
        --left;
      }
    }
    if (left > 0) std::this_thread::sleep_for(milliseconds(5));
  }
  return result;
}

// This process's arguments, exactly as it was started (argv[1..]), from /proc/self/cmdline.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  COHORT_CHECK_IO(in.good(), "bench collectives: cannot read /proc/self/cmdline");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string file = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(file.c_str(), X_OK) == 0) return file;
    start = end + 1;
  }
  return "";
}

// Replaces this process by `mpirun ... -n N <this program> <same arguments>`; mpirun's ranks
// then find OMPI_COMM_WORLD_SIZE set and run the sweep. Returns only by throwing.
int exec_under_mpirun(int ranks) {
  std::string mpirun = find_on_path("mpirun");
  COHORT_CHECK_IO(!mpirun.empty(),
                  "bench collectives: --backend mpi needs mpirun, which is not on PATH (install "
                  "openmpi-bin, or run the command under mpirun yourself)");
  char self[4096];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  COHORT_CHECK_IO(len > 0, "bench collectives: cannot resolve /proc/self/exe");
  self[len] = '\0';
  std::vector<std::string> args = {mpirun, "--allow-run-as-root", "--oversubscribe",
                                   "-n",   std::to_string(ranks), "--mca",
                                   "btl",  "self,vader",          self};
  for (std::string& a : own_arguments()) args.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(mpirun.c_str(), argv.data());
  COHORT_CHECK_IO(false, "bench collectives: cannot run ", mpirun, ": ", std::strerror(errno));
  return 1;  // unreachable: the check above throws
}

int run_bench_mpi(const BenchPlan& plan) {
  COHORT_CHECK_ARG(kHaveMpiBackend,
                   "bench collectives: --backend mpi: this build has no MPI backend: install "
                   "libopenmpi-dev and rebuild");
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return exec_under_mpirun(plan.ranks);
  return run_bench_mpi_rank(plan);
}

}  // namespace

// Without cohort_comm_mpi there is no bench_sweep_mpi.cc; run_bench_mpi refuses before this.
#ifndef COHORT_HAVE_MPI_BACKEND
int run_bench_mpi_rank(BenchPlan) {
  COHORT_INTERNAL(false, "bench collectives: run_bench_mpi_rank without an MPI backend");
  return 1;
}
#endif

int run_bench_collectives(const BenchCollectivesOptions& options) {
  BenchPlan plan = make_plan(options);
  if (options.backend == "mpi") return run_bench_mpi(plan);
  net::Secret secret = net::Secret::generate();
  std::vector<pid_t> pids;
  std::vector<int> write_fds;
  for (int r = 0; r < plan.ranks; ++r) {
    int fds[2];
    COHORT_CHECK_IO(::pipe(fds) == 0, "bench collectives: pipe() failed");
    std::fflush(nullptr);
    pid_t pid = ::fork();
    COHORT_CHECK_IO(pid >= 0, "bench collectives: fork() failed for rank ", r);
    if (pid == 0) {
      ::close(fds[1]);
      for (int fd : write_fds) ::close(fd);  // else a rank could outlive a dead parent's pipe
      rank_main(plan, r, fds[0], secret);
    }
    ::close(fds[0]);
    pids.push_back(pid);
    write_fds.push_back(fds[1]);
  }
  // Every rank exists: only now may this process start threads (the store server's).
  int result = 1;
  try {
    rendezvous::TcpStoreServerOptions so;
    so.secret = secret;
    rendezvous::TcpStoreServer server(so);
    uint16_t port = server.port();
    for (int fd : write_fds) (void)!::write(fd, &port, sizeof(port));
    for (int fd : write_fds) ::close(fd);
    write_fds.clear();
    result = wait_ranks(pids, plan.timeout + std::chrono::seconds(5));
  } catch (...) {
    for (int fd : write_fds) ::close(fd);  // the ranks see EOF and exit
    wait_ranks(pids, milliseconds(0));
    throw;
  }
  return result;
}

}  // namespace cohort::cli
