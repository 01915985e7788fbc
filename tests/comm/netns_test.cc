// Multi-host over real network namespaces: two "hosts" (namespaces joined by a veth pair) of
// two rank processes each. Ranks in one namespace talk shared memory, ranks in different ones
// TCP with the job secret, and the hierarchical allreduce crosses the veth link once per host.
// Needs root (ip netns add); skipped with the reason otherwise. The namespaces (and with them
// the veth pair) are deleted on every path out of the test, including failed assertions.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "tests/comm/collective_util.h"
#include "tests/comm/fork_ranks.h"
#include "tests/support/netns.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using std::chrono::milliseconds;

enum Exit { kOk = 0, kWrongResult = 1, kThrew = 2, kNoNetns = 3, kChildTimeout = 99 };
constexpr int kHosts = 2, kPerHost = 2;
const char* const kAddress[kHosts] = {"10.231.0.1", "10.231.0.2"};

bool enter(const std::string& ns) {
  int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

struct Job {
  const cohort::testing::Namespaces* ns;
  net::Secret secret;
  uint16_t store_port = 0;
};

// Every rank: the topology and transports the namespaces imply, then hierarchical allreduces
// checked exactly against the reference.
std::shared_ptr<Communicator> connect(const Job& job, int rank, milliseconds timeout) {
  int host = rank / kPerHost, world = kHosts * kPerHost;
  rendezvous::TcpStoreOptions so;
  so.host = kAddress[0];
  so.port = job.store_port;
  so.secret = job.secret;
  so.timeout = std::chrono::seconds(20);
  CommOptions o = test_options(transport::TransportKind::kAuto);
  o.device.secret = job.secret;
  o.device.bind_address = kAddress[host];
  o.timeout = timeout;
  return Communicator::create(std::make_shared<rendezvous::TcpStore>(so), rank, world, o);
}

int rank_main(const Job& job, int rank) {
  int host = rank / kPerHost, world = kHosts * kPerHost;
  if (!enter(job.ns->name(host))) return kNoNetns;
  auto c = connect(job, rank, milliseconds(5000));
  bool ok = c->topology().describe() == "2 hosts: [0 1] [2 3]" &&
            choose_allreduce_algorithm(*c, 1 << 20) == Algorithm::kHierarchical;
  for (int p = 0; p < world; ++p) {
    if (p != rank) ok &= std::string(c->transport_of(p)) == (p / kPerHost == host ? "shm" : "tcp");
  }
  if (!ok) {
    std::fprintf(stderr, "rank %d: topology %s\n", rank, c->topology().describe().c_str());
    return kWrongResult;
  }
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (size_t count : {size_t{1009}, size_t{4099}}) {
        auto buf = make_input(t, op, rank, count);
        allreduce(*c, {.output = buf.data(),
                       .count = count,
                       .dtype = t,
                       .op = op,
                       .algorithm = Algorithm::kHierarchical});
        std::string diff = compare(t, buf.data(), reference(t, op, world, count).data(), count);
        if (!diff.empty()) {
          std::fprintf(stderr, "rank %d %s %s: %s\n", rank, dtype_name(t), reduce_op_name(op),
                       diff.c_str());
          return kWrongResult;
        }
      }
    }
  }
  barrier(*c);
  return kOk;
}

// After one allreduce, rank 2 takes its host's end of the veth link down: packets between the
// hosts vanish without an error, as when a cable is pulled. The next allreduce must fail on
// every rank within the deadline; the leaders (0 and 2), which wait on each other across the
// link, get a Timeout naming the other one.
int link_down_main(const Job& job, int rank) {
  const int timeout_ms = 1000;
  int host = rank / kPerHost;
  if (!enter(job.ns->name(host))) return kNoNetns;
  auto c = connect(job, rank, milliseconds(timeout_ms));
  std::vector<float> buf(4099, 1.0f);
  allreduce(*c, {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kHierarchical});
  barrier(*c);
  if (rank == 2 && cohort::testing::shell("ip link set " + job.ns->veth(1) + " down") != 0)
    return kNoNetns;
  auto start = std::chrono::steady_clock::now();
  std::string what;
  bool timeout = false;
  try {
    allreduce(*c,
              {.output = buf.data(), .count = buf.size(), .algorithm = Algorithm::kHierarchical});
    std::fprintf(stderr, "rank %d: allreduce over a dead link did not fail\n", rank);
    return kWrongResult;
  } catch (const Timeout& e) {
    what = e.what();
    timeout = true;
  } catch (const IoError& e) {
    what = e.what();
  }
  auto took = std::chrono::steady_clock::now() - start;
  bool ok =
      took < milliseconds(timeout_ms + 1000) && what.find("allreduce #2") != std::string::npos;
  if (rank == 0 || rank == 2) {
    ok &= timeout && what.find(detail::str("from rank ", 2 - rank)) != std::string::npos;
  }
  if (!ok) {
    std::fprintf(stderr, "rank %d after %lld ms: %s\n", rank,
                 (long long)std::chrono::duration_cast<milliseconds>(took).count(), what.c_str());
    return kWrongResult;
  }
  return kOk;
}

// Forks fn(rank) for every rank; returns exit codes. Stragglers are killed after 30 s.
std::vector<int> run_ranks_as_processes(const Job& job, int world, int (*fn)(const Job&, int)) {
  return testing::fork_ranks(
      world, [&](int r) { return fn(job, r); }, kThrew, kChildTimeout);
}

// The store server in a process of its own inside host 0's namespace (forking ranks from a
// process with a server thread could inherit a held lock).
class StoreInNamespace {
 public:
  StoreInNamespace(const std::string& ns, const net::Secret& secret) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      uint16_t port = 0;
      try {
        if (enter(ns)) {
          rendezvous::TcpStoreServerOptions so;
          so.host = kAddress[0];
          so.secret = secret;
          static rendezvous::TcpStoreServer server(so);
          port = server.port();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "store: %s\n", e.what());
      }
      (void)!::write(fds[1], &port, sizeof(port));
      for (;;) ::pause();  // until the test kills it
    }
    ::close(fds[1]);
    if (::read(fds[0], &port_, sizeof(port_)) != ssize_t(sizeof(port_))) port_ = 0;
    ::close(fds[0]);
  }
  ~StoreInNamespace() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// Runs fn on 2 namespaces x 2 rank processes, with the store in the first namespace.
void run_in_namespaces(int (*fn)(const Job&, int)) {
  cohort::testing::Namespaces ns(
      kAddress[0], kAddress[1]);  // declared first: deleted last, after every process in it is gone
  if (!ns.error().empty()) GTEST_SKIP() << ns.error();
  Job job{&ns, net::Secret::generate()};
  StoreInNamespace store(ns.name(0), job.secret);
  ASSERT_NE(store.port(), 0) << "the store did not start in namespace " << ns.name(0);
  job.store_port = store.port();
  auto codes = run_ranks_as_processes(job, kHosts * kPerHost, fn);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], kOk) << "rank " << r;
}

TEST(NetworkNamespaces, HierarchicalAllreduceTwoHostsOfTwoRanksOverVeth) {
  run_in_namespaces(rank_main);
}

TEST(NetworkNamespaces, VethLinkDownFailsEveryRankWithinDeadline) {
  run_in_namespaces(link_down_main);
}

}  // namespace
}  // namespace cohort::comm
