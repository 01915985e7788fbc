// TLS on the service channel (net/tls.h) with a job PKI (net/pki.h): requests and
// pushes both ways through TLS, large and concurrent; a certificate from another CA, a plain
// TCP peer and a wrong secret are each refused, counted and logged, while good clients are
// served on; the PKI's files.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/net/pki.h"
#include "cohort/net/service/client.h"
#include "cohort/net/service/server.h"

namespace cohort::net::service {
namespace {

using namespace std::chrono_literals;
using net::Refusal;
using net::Secret;
using net::TlsOptions;
namespace fs = std::filesystem;

// Two independent job PKIs, made once for the whole suite (key generation is the slow part).
struct Pkis {
  fs::path root = fs::temp_directory_path() / ("cohort_tls_test_" + std::to_string(getpid()));
  Pkis() {
    fs::remove_all(root);
    net::write_job_pki((root / "a").string(), {.clients = 2});
    net::write_job_pki((root / "b").string(), {.clients = 1});
    net::write_job_pki((root / "c").string(), {.server_names = {"cohort.invalid"}, .clients = 1});
  }
  ~Pkis() { fs::remove_all(root); }
  TlsOptions tls(const std::string& job, const std::string& who) const {
    return {(root / job / "ca.pem").string(), (root / job / (who + ".pem")).string(),
            (root / job / (who + ".key")).string()};
  }
};
const Pkis& pkis() {
  static Pkis p;
  return p;
}

class ServiceTls : public ::testing::Test {
 protected:
  ServiceTls() {
    ServerOptions so;
    so.secret = secret_;
    so.auth_timeout = 3s;
    so.tls = pkis().tls("a", "server");
    Handlers h;
    h.on_request = [](const Peer&, uint64_t, Bytes q) -> std::optional<Bytes> { return q; };
    h.on_message = [this](const Peer& p, Bytes m) { server_->send(p.id, std::move(m)); };
    server_ = std::make_unique<Server>(so, h);
  }
  ClientOptions options(const std::string& job = "a", const std::string& who = "client-0") {
    ClientOptions o;
    o.port = server_->port();
    o.secret = secret_;
    o.tls = pkis().tls(job, who);
    o.connect_timeout = 5s;
    o.timeout = 20s;
    return o;
  }
  void expect_serves() {
    Client c(options("a", "client-1"));
    const Bytes b{1, 2, 3};
    EXPECT_EQ(c.request(b), b);
  }
  Secret secret_ = Secret::generate();
  std::unique_ptr<Server> server_;
};

TEST_F(ServiceTls, RequestsAndPushesBothWaysLargeAndConcurrent) {
  Client c(options());
  Bytes big(8 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 131 + 7);
  EXPECT_EQ(c.request(big), big);  // 8 MiB each way
  c.send(big);                     // pushed back by the server
  auto back = c.receive(20s);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, big);
  auto hammer = [&c](uint8_t tag) {
    for (int i = 0; i < 300; ++i) {
      const Bytes q{tag, uint8_t(i), uint8_t(i >> 8)};
      EXPECT_EQ(c.request(q), q);
    }
  };
  std::thread t1(hammer, 1), t2(hammer, 2);
  t1.join();
  t2.join();
}

TEST_F(ServiceTls, AnotherJobsCertificateIsRefusedCountedAndLogged) {
  log::ScopedCapture logs;
  try {
    Client bad(options("b", "client-0"));
    FAIL() << "a client of another job's CA must be refused";
  } catch (const HandshakeError& e) {
    EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
  }
  for (int i = 0; i < 100 && server_->stats().refused[size_t(Refusal::kTlsHandshake)] == 0; ++i)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kTlsHandshake)], 1u);
  EXPECT_EQ(logs.count("TLS handshake failed"), 1u) << logs.text();
  expect_serves();
}

TEST_F(ServiceTls, AClientCertificateTheJobCaDidNotSignIsRefused) {
  log::ScopedCapture logs;
  ClientOptions o = options();
  o.tls.cert_file = pkis().tls("b", "client-0").cert_file;  // trusts our CA, signed by another
  o.tls.key_file = pkis().tls("b", "client-0").key_file;
  EXPECT_THROW(Client c(o), HandshakeError);
  for (int i = 0; i < 100 && server_->stats().refused[size_t(Refusal::kTlsHandshake)] == 0; ++i)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kTlsHandshake)], 1u);
  EXPECT_EQ(logs.count("certificate verify failed"), 1u) << logs.text();
  expect_serves();
}

TEST_F(ServiceTls, APlainTcpClientIsRefusedAndOthersAreServed) {
  ClientOptions o = options();
  o.tls = {};  // speaks the secret's handshake in the clear
  EXPECT_THROW(Client c(o), IoError);
  expect_serves();
}

TEST_F(ServiceTls, TheRightCertificateWithTheWrongSecretIsRefused) {
  ClientOptions o = options();
  o.secret = Secret::generate();
  try {
    Client c(o);
    FAIL() << "a wrong secret must be refused even with a good certificate";
  } catch (const HandshakeError& e) {
    EXPECT_NE(std::string(e.what()).find("authentication failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kBadHmac)], 1u);
  expect_serves();
}

TEST(ServiceTlsNames, TheServerMustCarryTheNameTheClientDialled) {
  ServerOptions so;
  so.secret = Secret::generate();
  so.tls = pkis().tls("c", "server");  // names only cohort.invalid
  Server server(so, Handlers{});
  ClientOptions o;
  o.port = server.port();
  o.secret = so.secret;
  o.tls = pkis().tls("c", "client-0");
  o.connect_timeout = 5s;
  try {
    Client c(o);
    FAIL() << "127.0.0.1 is not among the server certificate's names";
  } catch (const HandshakeError& e) {
    EXPECT_NE(std::string(e.what()).find("TLS handshake"), std::string::npos) << e.what();
  }
}

TEST(JobPki, KeysArePrivateAndACaIsNeverOverwritten) {
  const fs::path dir = pkis().root / "a";
  for (const char* key : {"ca.key", "server.key", "client-0.key", "client-1.key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir / key).c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  EXPECT_THROW(net::write_job_pki(dir.string(), {}), InvalidArgument);
  net::add_client_certs(dir.string(), 5, 1);
  EXPECT_TRUE(fs::exists(dir / "client-5.pem"));
}

}  // namespace
}  // namespace cohort::net::service
