// The federated server over TLS with a job PKI (net/pki.h), against hostile peers on
// real loopback sockets: a connect-and-close with no byte, garbage, a peer that never speaks,
// and a client that presents another client's certificate. After each, rounds still complete.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <random>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/federated/client.h"
#include "cohort/federated/coordinator.h"
#include "cohort/federated/server.h"
#include "cohort/net/pki.h"
#include "cohort/net/secret.h"

namespace cohort::federated {
namespace {

using namespace std::chrono_literals;
using net::Refusal;
namespace fs = std::filesystem;

// One job PKI for the suite (key generation is the slow part).
struct Keys {
  fs::path dir = fs::temp_directory_path() / ("cohort_fl_tls_test_" + std::to_string(getpid()));
  Keys() {
    fs::remove_all(dir);
    net::write_job_pki(dir.string(), {.clients = 3});
  }
  ~Keys() { fs::remove_all(dir); }
  net::TlsOptions tls(const std::string& who) const {
    return {(dir / "ca.pem").string(), (dir / (who + ".pem")).string(),
            (dir / (who + ".key")).string()};
  }
};
const Keys& keys() {
  static Keys k;
  return k;
}

ps::Layout layout() {
  ps::Layout l;
  l.params = {{"w", 8, 0, 0}};
  l.total = 8;
  return l;
}

LocalTrainFn delta_of(float v) {
  return [v](const Task& t) {
    LocalResult r;
    r.delta.assign(t.params.size(), v);
    r.num_samples = 10;
    return r;
  };
}

// A TLS federated server with a coordinator, and clients as threads.
struct TlsJob {
  net::Secret secret = net::Secret::generate();
  std::unique_ptr<FlServer> server;
  std::unique_ptr<Coordinator> coord;
  std::deque<FlClient> clients;
  std::vector<std::thread> threads;

  TlsJob() {
    FlServerOptions so;
    so.service.secret = secret;
    so.service.tls = keys().tls("server");
    so.service.auth_timeout = 1500ms;  // the never-speaking peer's deadline
    so.layout = layout();
    so.expected_clients = 2;
    server = std::make_unique<FlServer>(so);
    CoordinatorOptions o;
    o.clients = 2;
    o.fraction = 1.0;
    o.min_clients = 2;
    o.round_timeout = 10s;
    o.wait_clients = 10s;
    o.max_retries = 0;
    coord = std::make_unique<Coordinator>(*server, strategy_registry().make("fedavg", {}), o,
                                          std::vector<float>(8, 1.f));
  }
  FlClientOptions client_options(uint32_t id, const std::string& cert) const {
    FlClientOptions o;
    o.service.port = server->service().port();
    o.service.secret = secret;
    o.service.tls = keys().tls(cert);
    o.service.connect_timeout = 5s;
    o.id = id;
    o.num_samples = 10;
    o.layout = layout();
    o.reconnect_timeout = 10s;
    o.poll = 20ms;
    return o;
  }
  void start(uint32_t id) {
    FlClient* c = &clients.emplace_back(client_options(id, net::client_cert_name(id)),
                                        delta_of(float(id + 1)));
    threads.emplace_back([c] {
      try {
        c->run();
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  ~TlsJob() {
    server->say_bye();
    for (auto& c : clients) c.stop();
    for (auto& t : threads) t.join();
  }
};

// A raw TCP connection to the server's port (no TLS, no handshake).
int dial(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// Whether the server closes fd (a read sees EOF or a reset) within `limit`.
bool server_closes(int fd, std::chrono::milliseconds limit) {
  timeval tv{long(limit.count() / 1000), long(limit.count() % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  for (;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    if (r < 0) return false;  // timed out: still open
  }
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

TEST(FlTls, ConnectAndCloseThenGarbageThenARoundCompletes) {
  TlsJob job;
  const uint16_t port = job.server->service().port();
  // A peer that connects and never speaks is held to the handshake deadline, without blocking.
  const int silent = dial(port);
  // Connect and close with no byte, many times: each once wedged the loop in flush().
  for (int i = 0; i < 20; ++i) ::close(dial(port));
  // Garbage, then another silent hang-up; the server must close the garbage peer itself.
  std::mt19937 rng(7);
  std::vector<uint8_t> junk(64 << 10);
  for (auto& b : junk) b = uint8_t(rng());
  const int garbage = dial(port);
  // The server may close mid-send (it refuses at the first bad record): the send's count varies.
  EXPECT_NE(::send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
  EXPECT_TRUE(server_closes(garbage, 5000ms));
  ::close(garbage);
  ::close(dial(port));
  // Nothing spins: the process is nearly idle while the silent peer waits for its deadline.
  const double cpu0 = cpu_seconds();
  std::this_thread::sleep_for(500ms);
  EXPECT_LT(cpu_seconds() - cpu0, 0.25) << "a thread is busy with a dead connection";

  job.start(0);
  job.start(1);
  ASSERT_EQ(job.server->wait_for_clients(2, Clock::now() + 10s), 2);
  const RoundRecord rec = job.coord->run_round(0);
  EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1}));
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 1.5f, 1e-6);  // mean of 1 and 2

  EXPECT_TRUE(server_closes(silent, 5000ms));  // past auth_timeout
  ::close(silent);
  // The loop closes a socket a moment before it counts it gone.
  for (int i = 0; i < 100 && job.server->service().stats().open > 2; ++i)
    std::this_thread::sleep_for(10ms);
  const net::ServerStats st = job.server->service().stats();
  EXPECT_GE(st.refused[size_t(Refusal::kHungUp)], 21u);
  EXPECT_GE(st.refused[size_t(Refusal::kTlsHandshake)], 1u);
  EXPECT_EQ(st.refused[size_t(Refusal::kAuthTimeout)], 1u);
  EXPECT_EQ(st.open, 2u);  // the two clients; no dead connection left behind
}

TEST(FlTls, AClientPresentingAnotherClientsCertificateIsRefusedNamingBothIds) {
  TlsJob job;
  log::ScopedCapture logs;
  FlClient impostor(job.client_options(2, "client-1"), delta_of(9.f));
  try {
    impostor.run();
    FAIL() << "client 2 with client 1's certificate must be refused";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("claims to be client 2"), std::string::npos) << what;
    EXPECT_NE(what.find("certificate names client 1"), std::string::npos) << what;
  }
  EXPECT_EQ(job.server->refused(), 1u);
  EXPECT_EQ(logs.count("claims to be client 2 but its certificate names client 1"), 1u)
      << logs.text();
  EXPECT_TRUE(job.server->connected().empty());
  // The real clients 0 and 1 join and train.
  job.start(0);
  job.start(1);
  ASSERT_EQ(job.server->wait_for_clients(2, Clock::now() + 10s), 2);
  EXPECT_EQ(job.coord->run_round(0).participants, (std::vector<uint32_t>{0, 1}));
}

}  // namespace
}  // namespace cohort::federated
