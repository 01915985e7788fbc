// TcpStore / TcpStoreServer against hostile and unlucky conditions: wrong secrets, garbage,
// oversize frames, silent peers, late servers, dying servers. The server must drop the bad
// connection, say who it was, and keep serving everyone else.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/net/auth.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"
#include "cohort/rendezvous/wire.h"
#include "cohort/rendezvous/world_store.h"

namespace cohort::rendezvous {
namespace {

using namespace std::chrono_literals;

TcpStoreOptions client_options(uint16_t port, const net::Secret& secret) {
  TcpStoreOptions o;
  o.port = port;
  o.secret = secret;
  o.timeout = 3s;
  o.connect_timeout = 2s;
  return o;
}

net::Fd raw_connect(uint16_t port) {
  return net::connect_tcp("127.0.0.1", port, net::deadline_after(2s), "test server");
}

// Reads until the server closes the connection. False if it is still open after `within`.
bool closed_by_server(int fd, Millis within) {
  uint8_t buf[4096];
  try {
    for (;;) net::read_exact(fd, buf, 1, net::deadline_after(within), "server", "anything");
  } catch (const Timeout&) {
    return false;
  } catch (const IoError&) {
    return true;
  }
}

// The server keeps serving: a fresh, well-behaved client can set and read back.
void expect_serves(const TcpStoreServer& server, const net::Secret& secret) {
  TcpStore good(client_options(server.port(), secret));
  good.set_string("alive", "yes");
  EXPECT_EQ(good.get_string("alive", 1s), "yes");
}

class TcpStoreServerTest : public ::testing::Test {
 protected:
  TcpStoreServerTest() {
    TcpStoreServerOptions so;
    so.secret = secret_;
    so.auth_timeout = 300ms;
    server_ = std::make_unique<TcpStoreServer>(so);
  }
  net::Secret secret_ = net::Secret::generate();
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreServerTest, BindsLoopbackOnAnOsChosenPortByDefault) {
  EXPECT_EQ(server_->host(), "127.0.0.1");
  EXPECT_NE(server_->port(), 0);
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
  net::Fd fd = raw_connect(server_->port());
  EXPECT_EQ(net::peer_address(fd.get()), server_->address());
}

TEST_F(TcpStoreServerTest, LargeValuesCrossInPiecesIntact) {
  TcpStore a(client_options(server_->port(), secret_));
  TcpStore b(client_options(server_->port(), secret_));
  Bytes big(3 << 19);  // more than a socket buffer: arrives in pieces
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 2654435761u >> 24);
  a.set("big", big);
  EXPECT_EQ(b.get("big"), big);
  EXPECT_EQ(b.compare_set("big", big, Bytes{1}), Bytes{1});
}

TEST_F(TcpStoreServerTest, WrongSecretIsRefusedAndOthersAreStillServed) {
  TcpStore good(client_options(server_->port(), secret_));
  good.set_string("before", "1");
  try {
    TcpStore bad(client_options(server_->port(), net::Secret::generate()));
    FAIL() << "a client with the wrong secret must be refused";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              "authentication failed: wrong job secret for store at 127.0.0.1:" +
                  std::to_string(server_->port()));
  }
  EXPECT_EQ(server_->stats().auth_failures, 1u);
  EXPECT_EQ(good.get_string("before"), "1");
  expect_serves(*server_, secret_);
}

TEST_F(TcpStoreServerTest, InsecureModeNeedsAnExplicitOptInAndLoopback) {
  TcpStoreServerOptions so;  // no secret
  EXPECT_THROW(TcpStoreServer{so}, InvalidArgument);
  so.secret_policy = net::SecretPolicy::kAllowInsecure;
  so.host = "0.0.0.0";
  EXPECT_THROW(TcpStoreServer{so}, InvalidArgument);
  so.host = "127.0.0.1";
  TcpStoreServer insecure(so);
  TcpStoreOptions co = client_options(insecure.port(), net::Secret());
  EXPECT_THROW(TcpStore{co}, InvalidArgument);  // the client must opt in too
  co.secret_policy = net::SecretPolicy::kAllowInsecure;
  TcpStore client(co);
  client.set_string("k", "v");
  EXPECT_EQ(client.get_string("k"), "v");
  // A secure client does not talk to an insecure server, nor the reverse.
  EXPECT_THROW(TcpStore(client_options(insecure.port(), secret_)), IoError);
  co.port = server_->port();
  EXPECT_THROW(TcpStore{co}, IoError);
}

TEST_F(TcpStoreServerTest, GarbageBeforeAuthenticationIsDroppedAndLogged) {
  net::Fd fd = raw_connect(server_->port());
  uint8_t challenge[net::auth::kChallengeBytes];
  net::read_exact(fd.get(), challenge, sizeof(challenge), net::deadline_after(1s), "server",
                  "challenge");
  std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  log::ScopedCapture logs;
  net::write_all(fd.get(), http.data(), http.size(), net::deadline_after(1s), "server", "garbage");
  EXPECT_TRUE(closed_by_server(fd.get(), 2s));
  EXPECT_EQ(logs.count("refused " + net::local_address(fd.get()) + ": not a cohort handshake"), 1u)
      << logs.text();
  EXPECT_EQ(server_->stats().dropped, 1u);
  expect_serves(*server_, secret_);
}

// Waits (briefly) until the server has counted `n` refusals.
void await_refusals(const TcpStoreServer& server, uint64_t n) {
  auto deadline = Clock::now() + 5s;
  while (server.stats().refused_total() < n && Clock::now() < deadline)
    std::this_thread::sleep_for(2ms);
}

// A raw connection that answers the challenge with `bytes` (after reading it).
net::Fd send_after_challenge(uint16_t port, const std::string& bytes) {
  net::Fd fd = raw_connect(port);
  uint8_t challenge[net::auth::kChallengeBytes];
  net::read_exact(fd.get(), challenge, sizeof(challenge), net::deadline_after(1s), "server",
                  "challenge");
  try {
    net::write_all(fd.get(), bytes.data(), bytes.size(), net::deadline_after(1s), "server",
                   "bytes");
  } catch (const IoError&) {
    // the server may already have hung up
  }
  return fd;
}

TEST_F(TcpStoreServerTest, EachRefusedPeerLeavesOneLineWithItsAddressAndReason) {
  log::ScopedCapture logs;
  net::Fd wrong = raw_connect(server_->port());
  EXPECT_THROW(
      net::auth::answer_challenge(wrong.get(), net::Secret::generate(), net::auth::kStoreContext,
                                  net::deadline_after(2s), "server"),
      IoError);
  net::Fd garbage = send_after_challenge(server_->port(), std::string(80, '\x5a'));
  await_refusals(*server_, 2);
  const std::string wrong_peer = net::local_address(wrong.get());
  const std::string garbage_peer = net::local_address(garbage.get());
  EXPECT_EQ(logs.count("refused " + wrong_peer + ": bad HMAC (wrong job secret?)"), 1u)
      << logs.text();
  EXPECT_EQ(logs.count("refused " + garbage_peer + ": not a cohort handshake"), 1u) << logs.text();
  EXPECT_EQ(logs.count("refused "), 2u) << logs.text();
  const auto stats = server_->stats();
  EXPECT_EQ(stats.refused[size_t(net::Refusal::kBadHmac)], 1u);
  EXPECT_EQ(stats.refused[size_t(net::Refusal::kNotHandshake)], 1u);
  EXPECT_EQ(stats.refused_total(), 2u);
  server_.reset();  // the shutdown line sums them up
  EXPECT_EQ(logs.count("refused 2 peers in all (1 not a cohort handshake, 1 bad HMAC)"), 1u)
      << logs.text();
}

// A flood of bad connections: every one is counted, a bounded number of lines is printed, and
// the next line after the flood says how many were held back.
TEST_F(TcpStoreServerTest, AFloodOfRefusalsIsCountedInFullButLoggedBriefly) {
  constexpr uint64_t kFlood = 200;
  log::ScopedCapture logs;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < kFlood; ++i) send_after_challenge(server_->port(), "\x01garbage");
  await_refusals(*server_, kFlood);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(server_->stats().refused[size_t(net::Refusal::kNotHandshake)], kFlood);
  const uint64_t printed = logs.count("refused 127.0.0.1:");
  // At most 5 lines per started second of flood.
  EXPECT_LE(printed, 5 * (uint64_t(elapsed) + 1)) << logs.text();
  EXPECT_GE(printed, 1u);
  // After the window, the next refusal is printed with the count held back before it.
  std::this_thread::sleep_for(1100ms);
  send_after_challenge(server_->port(), "\x02garbage");
  await_refusals(*server_, kFlood + 1);
  const std::string note = " more refused in the last ";
  uint64_t held_back = 0;
  for (const auto& line : logs.lines()) {
    size_t at = line.message.find(" (+");
    if (at != std::string::npos && line.message.find(note, at) != std::string::npos)
      held_back += std::stoull(line.message.substr(at + 3));
  }
  EXPECT_EQ(printed + held_back, kFlood) << logs.text();
  EXPECT_EQ(logs.count("refused 127.0.0.1:"), printed + 1) << logs.text();
  server_.reset();
  EXPECT_EQ(logs.count("refused 201 peers in all (201 not a cohort handshake)"), 1u) << logs.text();
}

TEST_F(TcpStoreServerTest, SilentPeerIsDroppedAfterTheAuthTimeout) {
  net::Fd fd = raw_connect(server_->port());
  auto start = Clock::now();
  testing::internal::CaptureStderr();
  EXPECT_TRUE(closed_by_server(fd.get(), 3s));
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_NE(log.find("did not authenticate within 0.3 s"), std::string::npos) << log;
  expect_serves(*server_, secret_);
}

// An authenticated raw connection, to send frames by hand.
net::Fd authenticated(const TcpStoreServer& server, const net::Secret& secret) {
  net::Fd fd = raw_connect(server.port());
  net::auth::answer_challenge(fd.get(), secret, net::auth::kStoreContext, net::deadline_after(2s),
                              "server");
  return fd;
}

TEST_F(TcpStoreServerTest, OversizeLengthFieldIsRefusedAtTheHeader) {
  net::Fd fd = authenticated(*server_, secret_);
  Bytes frame;
  wire::Request q;
  q.command = wire::Command::kSet;
  q.keys = {"k"};
  wire::encode_request(q, &frame);
  frame.resize(wire::kHeaderBytes);
  for (int i = 0; i < 4; ++i) frame[5 + i] = 0xff;  // body_len = 4 GiB - 1
  testing::internal::CaptureStderr();
  net::write_all(fd.get(), frame.data(), frame.size(), net::deadline_after(1s), "server", "header");
  // Dropped on the header alone: the server does not wait for (or allocate) 4 GiB.
  EXPECT_TRUE(closed_by_server(fd.get(), 2s));
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("exceeds the limit"), std::string::npos) << log;
  EXPECT_NE(log.find(net::local_address(fd.get())), std::string::npos) << log;
  expect_serves(*server_, secret_);
}

TEST_F(TcpStoreServerTest, RandomGarbageFramesNeverKillTheServer) {
  std::mt19937 rng(1234);  // deterministic
  auto byte = [&] { return uint8_t(rng()); };
  TcpStore watcher(client_options(server_->port(), secret_));
  testing::internal::CaptureStderr();  // the expected "refused" lines
  for (int iter = 0; iter < 120; ++iter) {
    int kind = iter % 4;
    net::Fd fd = kind == 0 ? raw_connect(server_->port()) : authenticated(*server_, secret_);
    Bytes junk(1 + rng() % 300);
    for (auto& b : junk) b = byte();
    if (kind >= 2) {  // a valid magic, so the parser gets past the first check
      wire::Request q;
      q.command = wire::Command(1 + rng() % 7);
      q.keys = {"key" + std::to_string(iter)};
      Bytes good;
      wire::encode_request(q, &good);
      if (kind == 2) junk.insert(junk.begin(), good.begin(), good.begin() + 5);  // bad length
      if (kind == 3) {  // a real frame with a few bytes flipped
        junk = good;
        junk[5 + rng() % (junk.size() - 5)] ^= uint8_t(1 + rng() % 255);
      }
    }
    try {
      net::write_all(fd.get(), junk.data(), junk.size(), net::deadline_after(1s), "server", "junk");
    } catch (const IoError&) {
      // the server may already have hung up
    }
    if (iter % 10 == 0) {
      EXPECT_EQ(watcher.add("progress", 1), iter / 10 + 1);
    }
  }
  // Kinds 0 and 1 always break the protocol at the magic: every one of them was dropped.
  auto deadline = Clock::now() + 2s;
  while (server_->stats().dropped < 60 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_GE(server_->stats().dropped, 60u) << log;
  expect_serves(*server_, secret_);
}

TEST_F(TcpStoreServerTest, ClientRetriesUntilALateServerStarts) {
  uint16_t port = server_->port();
  server_.reset();  // the port is free again
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    TcpStoreServerOptions so;
    so.secret = secret_;
    so.port = port;
    server_ = std::make_unique<TcpStoreServer>(so);
  });
  TcpStore client(client_options(port, secret_));  // blocks until the server is up
  late.join();
  client.set_string("k", "v");
  EXPECT_EQ(client.get_string("k"), "v");
}

TEST_F(TcpStoreServerTest, NoServerIsATimeoutNamingTheAddress) {
  uint16_t port = server_->port();
  server_.reset();
  TcpStoreOptions co = client_options(port, secret_);
  co.connect_timeout = 200ms;
  try {
    TcpStore client(co);
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("could not connect to store at 127.0.0.1:" +
                                         std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TcpStoreServerTest, ServerShutdownReleasesABlockedGetWithAnError) {
  TcpStoreOptions co = client_options(server_->port(), secret_);
  co.connect_timeout = 300ms;  // also bounds the reconnect attempt below
  TcpStore client(co);
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server_.reset();
  });
  auto start = Clock::now();
  EXPECT_THROW(client.get("never", 5s), IoError);
  EXPECT_LT(Clock::now() - start, 2s);
  stopper.join();
  // Later calls fail too, within the short reconnect window, naming the store.
  try {
    client.set_string("k", "v");
    FAIL() << "the server is gone";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("could not connect to store at"), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST_F(TcpStoreServerTest, ParkedWaitersAreReleasedOnlyWhenAllTheirKeysExist) {
  // Many clients parked at once on overlapping key sets; one writer releases them in stages.
  constexpr int kWaiters = 12;
  std::vector<std::thread> threads;
  std::atomic<int> released{0};
  for (int i = 0; i < kWaiters; ++i)
    threads.emplace_back([&, i] {
      TcpStore s(client_options(server_->port(), secret_));
      s.wait({"go", "k" + std::to_string(i % 3)}, 3s);
      released++;
    });
  TcpStore writer(client_options(server_->port(), secret_));
  std::this_thread::sleep_for(50ms);
  writer.set_string("k0", "");
  writer.set_string("k1", "");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(released.load(), 0) << "nobody has 'go' yet";
  writer.set_string("go", "1");
  auto deadline = Clock::now() + 2s;
  while (released.load() < 8 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(released.load(), 8) << "only the waiters on k0 and k1 are complete";
  writer.set_string("k2", "");
  for (auto& t : threads) t.join();
  EXPECT_EQ(released.load(), kWaiters);
}

TEST(WorldStore, Rank0HostsTheStoreAndEveryRankConnects) {
  uint16_t port;
  {
    net::Listener probe =
        net::listen_tcp("127.0.0.1", 0, 1);  // a free port, as a launcher would pick
    port = probe.port;
  }
  net::Secret secret = net::Secret::generate();
  auto rank = [&](int r) {
    WorldInfo w;
    w.rank = r;
    w.world_size = 2;
    w.local_world_size = 2;
    w.local_rank = r;
    w.master_addr = "127.0.0.1";
    w.master_port = port;
    w.secret = secret;
    WorldStoreOptions o;
    o.timeout = 3s;
    o.connect_timeout = 3s;
    return connect_world_store(w, o);
  };
  WorldStore r0 = rank(0);
  ASSERT_NE(r0.server, nullptr);
  EXPECT_EQ(r0.server->address(), "127.0.0.1:" + std::to_string(port));
  std::thread t([&] {
    WorldStore r1 = rank(1);
    EXPECT_EQ(r1.server, nullptr);
    r1.store->set_string("rank1/hello", "hi");
    EXPECT_EQ(r1.store->get_string("rank0/hello"), "hey");
  });
  EXPECT_EQ(r0.store->get_string("rank1/hello"), "hi");
  r0.store->set_string("rank0/hello", "hey");
  t.join();
}

}  // namespace
}  // namespace cohort::rendezvous
