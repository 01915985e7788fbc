// The service channel (net/service/): a long-lived server whose authenticated peers come and
// go, with request/response, pushes both ways, and hostile or broken peers dropped one by one.
// Real sockets on loopback, real threads. Every wait is on a condition with a generous deadline
// (the machine may be loaded); nothing sleeps to synchronize.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "cohort/core/bytes.h"
#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/net/auth.h"
#include "cohort/net/service/client.h"
#include "cohort/net/service/server.h"

namespace cohort::net::service {
namespace {

using namespace std::chrono_literals;
using net::Fd;
using net::Refusal;
using net::Secret;
using Clock = std::chrono::steady_clock;

Bytes bytes(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
std::string text(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// What the server's handlers saw, from the loop thread; tests wait on it.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Peer> joined;
  std::vector<std::pair<Peer, std::string>> left;
  std::vector<std::pair<uint64_t, std::string>> messages;  // peer id, payload
  std::vector<std::pair<uint64_t, uint64_t>> deferred;     // peer id, request id

  void update(const std::function<void()>& f) {
    {
      std::lock_guard<std::mutex> lock(mu);
      f();
    }
    cv.notify_all();
  }
  bool wait(const std::function<bool()>& pred, Millis within = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, within, pred);
  }
};

// Requests: "whoami" -> the peer id; "defer:..." -> answered later by the test; "fail" ->
// refused by the handler; anything else is echoed back behind "echo:".
Handlers handlers(Events& ev) {
  Handlers h;
  h.on_join = [&ev](const Peer& p) { ev.update([&] { ev.joined.push_back(p); }); };
  h.on_leave = [&ev](const Peer& p, const std::string& why) {
    ev.update([&] { ev.left.emplace_back(p, why); });
  };
  h.on_message = [&ev](const Peer& p, Bytes m) {
    ev.update([&] { ev.messages.emplace_back(p.id, text(m)); });
  };
  h.on_request = [&ev](const Peer& p, uint64_t id, Bytes q) -> std::optional<Bytes> {
    std::string s = text(q);
    if (s == "whoami") return bytes(std::to_string(p.id));
    if (s == "fail") throw InvalidArgument("no such key 'fail'");
    if (s.rfind("defer:", 0) == 0) {
      ev.update([&] { ev.deferred.emplace_back(p.id, id); });
      return std::nullopt;
    }
    return bytes("echo:" + s);
  };
  return h;
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() { start(); }
  void start(Millis frame_timeout = 10s) {
    server_.reset();
    ServerOptions so;
    so.secret = secret_;
    so.auth_timeout = 2s;
    so.frame_timeout = frame_timeout;
    so.max_payload_bytes = 1 << 20;
    server_ = std::make_unique<Server>(so, handlers(events_));
  }
  ClientOptions client_options(const Secret& secret) const {
    ClientOptions o;
    o.port = server_->port();
    o.secret = secret;
    o.timeout = 10s;
    o.connect_timeout = 5s;
    o.max_payload_bytes = 1 << 20;
    return o;
  }
  std::unique_ptr<Client> client() { return std::make_unique<Client>(client_options(secret_)); }
  uint64_t peer_id(Client& c) { return std::stoull(text(c.request(bytes("whoami")))); }
  // An authenticated connection of our own, to send bytes by hand.
  Fd raw_authenticated() {
    Fd fd = net::connect_tcp("127.0.0.1", server_->port(), net::deadline_after(5s), "test server");
    net::auth::answer_challenge(fd.get(), secret_, kContext, net::deadline_after(5s),
                                "test server");
    return fd;
  }
  void write_raw(const Fd& fd, const Bytes& b) {
    net::write_all(fd.get(), b.data(), b.size(), net::deadline_after(5s), "server", "test bytes");
  }
  std::string leave_reason(const std::string& local_address) {
    std::string why = "<no leave>";
    events_.wait([&] {
      for (const auto& [p, w] : events_.left) {
        if (p.address != local_address) continue;
        why = w;
        return true;
      }
      return false;
    });
    return why;
  }
  void expect_serves() {
    auto c = client();
    EXPECT_EQ(text(c->request(bytes("ping"))), "echo:ping");
  }

  Secret secret_ = Secret::generate();
  Events events_;
  std::unique_ptr<Server> server_;
};

// Reads until the server closes the connection. False if it is still open after `within`.
bool closed_by_server(const Fd& fd, Millis within) {
  uint8_t buf[4096];
  try {
    for (;;) net::read_exact(fd.get(), buf, 1, net::deadline_after(within), "server", "x");
  } catch (const Timeout&) {
    return false;
  } catch (const IoError&) {
    return true;
  }
}

TEST_F(ServiceTest, BindsLoopbackAndAnswersRequests) {
  EXPECT_EQ(server_->host(), "127.0.0.1");
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
  auto c = client();
  EXPECT_EQ(text(c->request(bytes("hello"))), "echo:hello");
  EXPECT_EQ(text(c->request(Bytes{})), "echo:");
  EXPECT_TRUE(c->connected());
  EXPECT_EQ(c->describe(), "service at " + server_->address());
}

TEST_F(ServiceTest, NoSecretNoServiceAndInsecureModeIsLoopbackOnly) {
  ServerOptions so;
  EXPECT_THROW(Server(so, Handlers{}), InvalidArgument);
  so.secret_policy = net::SecretPolicy::kAllowInsecure;
  so.host = "0.0.0.0";
  EXPECT_THROW(Server(so, Handlers{}), InvalidArgument);
}

TEST_F(ServiceTest, PeersJoinAndLeaveWhileOthersMakeRequests) {
  constexpr int kSteady = 3, kTransient = 10, kRequests = 40;
  std::vector<std::unique_ptr<Client>> steady;
  for (int i = 0; i < kSteady; ++i) steady.push_back(client());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kSteady; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRequests; ++r) {
        std::string q = std::to_string(i) + "/" + std::to_string(r);
        if (text(steady[i]->request(bytes(q))) != "echo:" + q) wrong++;
      }
    });
  }
  for (int i = 0; i < kTransient; ++i) {
    auto c = client();
    EXPECT_EQ(text(c->request(bytes("t"))), "echo:t");
  }  // each one leaves here
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  ASSERT_TRUE(events_.wait([&] { return events_.left.size() == size_t(kTransient); }));
  steady.clear();
  ASSERT_TRUE(events_.wait([&] { return events_.left.size() == size_t(kSteady + kTransient); }));
  std::lock_guard<std::mutex> lock(events_.mu);
  EXPECT_EQ(events_.joined.size(), size_t(kSteady + kTransient));
  std::set<uint64_t> ids;
  for (const auto& p : events_.joined) ids.insert(p.id);
  EXPECT_EQ(ids.size(), events_.joined.size()) << "peer ids are never reused";
  for (const auto& [p, why] : events_.left) EXPECT_EQ(why, "") << "a plain disconnect";
  EXPECT_EQ(server_->stats().refused_total(), 0u);
}

TEST_F(ServiceTest, WrongSecretIsRefusedAndLoggedRateLimited) {
  auto good = client();
  log::ScopedCapture logs;
  try {
    Client bad(client_options(Secret::generate()));
    FAIL() << "a client with the wrong secret must be refused";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              "authentication failed: wrong job secret for service at " + server_->address());
  }
  // Counted (and logged) before the refusal is sent, so no waiting is needed.
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kBadHmac)], 1u);
  EXPECT_EQ(logs.count(": bad HMAC (wrong job secret?)"), 1u) << logs.text();
  // A flood of them: every one counted, few lines.
  constexpr int kFlood = 30;
  const auto start = Clock::now();
  for (int i = 0; i < kFlood; ++i)
    EXPECT_THROW(Client(client_options(Secret::generate())), IoError);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kBadHmac)], 1u + kFlood);
  EXPECT_LE(logs.count("refused 127.0.0.1:"), 5 * (uint64_t(elapsed) + 1)) << logs.text();
  EXPECT_EQ(text(good->request(bytes("still"))), "echo:still");
  std::lock_guard<std::mutex> lock(events_.mu);
  EXPECT_EQ(events_.joined.size(), 1u) << "refused peers never join";
}

TEST_F(ServiceTest, GarbageAndHugeLengthFieldsCloseOnlyThatPeer) {
  auto good = client();
  log::ScopedCapture logs;
  // Garbage instead of the handshake.
  Fd pre = net::connect_tcp("127.0.0.1", server_->port(), net::deadline_after(5s), "test server");
  write_raw(pre, bytes("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(closed_by_server(pre, 10s));
  // Garbage after authenticating.
  Fd junk = raw_authenticated();
  write_raw(junk, bytes("\x01\x02garbage garbage"));
  EXPECT_TRUE(closed_by_server(junk, 10s));
  EXPECT_NE(leave_reason(net::local_address(junk.get())).find("bad service frame magic"),
            std::string::npos);
  // A header claiming a 4 GiB body: closed on the header alone.
  Fd huge = raw_authenticated();
  Bytes header;
  encode_frame(Kind::kRequest, 1, {}, &header);
  header.resize(kHeaderBytes);
  for (int i = 0; i < 4; ++i) header[5 + i] = 0xff;
  write_raw(huge, header);
  EXPECT_TRUE(closed_by_server(huge, 10s));
  const std::string why = leave_reason(net::local_address(huge.get()));
  EXPECT_NE(why.find("body length 4294967295 exceeds the limit"), std::string::npos) << why;
  EXPECT_EQ(logs.count("refused " + net::local_address(huge.get())), 1u) << logs.text();
  // Everyone else is still served.
  EXPECT_EQ(text(good->request(bytes("ok"))), "echo:ok");
  expect_serves();
  const auto stats = server_->stats();
  EXPECT_EQ(stats.refused[size_t(Refusal::kNotHandshake)], 1u);
  EXPECT_EQ(stats.refused[size_t(Refusal::kBadFrame)], 2u);
}

TEST_F(ServiceTest, APeerThatStopsMidFrameIsDroppedAfterTheDeadlineWhileOthersAreServed) {
  start(/*frame_timeout=*/400ms);
  auto good = client();
  Fd stalled = raw_authenticated();
  Bytes frame;
  encode_frame(Kind::kRequest, 7, bytes("a request that never ends"), &frame);
  frame.resize(frame.size() / 2);
  const auto start_time = Clock::now();
  write_raw(stalled, frame);
  // Others are served while it stalls.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(text(good->request(bytes("x"))), "echo:x");
  EXPECT_TRUE(closed_by_server(stalled, 10s));
  EXPECT_GE(Clock::now() - start_time, 350ms);
  const std::string why = leave_reason(net::local_address(stalled.get()));
  EXPECT_NE(why.find("stalled in the middle of a frame"), std::string::npos) << why;
  EXPECT_EQ(server_->stats().refused[size_t(Refusal::kFrameTimeout)], 1u);
  EXPECT_EQ(text(good->request(bytes("y"))), "echo:y");
}

// The same for a large frame, whose body the server receives into its own buffer; and a large
// message that claims an id is refused as soon as its header is in.
TEST_F(ServiceTest, APeerThatStopsMidwayThroughALargeBodyIsDroppedAfterTheDeadline) {
  start(/*frame_timeout=*/400ms);
  auto good = client();
  Fd stalled = raw_authenticated();
  Bytes frame;
  encode_frame(Kind::kRequest, 7, Bytes(size_t(300) << 10, 'q'), &frame);
  frame.resize(frame.size() / 2);
  const auto start_time = Clock::now();
  write_raw(stalled, frame);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(text(good->request(bytes("x"))), "echo:x");
  EXPECT_TRUE(closed_by_server(stalled, 10s));
  EXPECT_GE(Clock::now() - start_time, 350ms);
  std::string why = leave_reason(net::local_address(stalled.get()));
  EXPECT_NE(why.find("stalled in the middle of a frame"), std::string::npos) << why;

  Fd liar = raw_authenticated();
  frame.clear();
  const size_t start = net::frame::begin(&frame, kMagic, uint8_t(Kind::kMessage));
  bytes::put(frame, uint64_t{9});
  frame.resize(frame.size() + (size_t(200) << 10), 'm');
  net::frame::finish(&frame, start);
  frame.resize(kFrameHeadBytes + 100);
  write_raw(liar, frame);
  EXPECT_TRUE(closed_by_server(liar, 10s));
  why = leave_reason(net::local_address(liar.get()));
  EXPECT_NE(why.find("message with id 9"), std::string::npos) << why;
  EXPECT_EQ(text(good->request(bytes("y"))), "echo:y");
}

TEST_F(ServiceTest, OutstandingRequestsAreMatchedToTheirResponses) {
  auto c = client();
  constexpr int kThreads = 4;
  std::vector<std::string> answers(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      try {
        answers[i] = text(c->request(bytes("defer:" + std::to_string(i))));
      } catch (const InvalidArgument& e) {
        answers[i] = std::string("refused: ") + e.what();
      }
    });
  ASSERT_TRUE(events_.wait([&] { return events_.deferred.size() == size_t(kThreads); }));
  std::vector<std::pair<uint64_t, uint64_t>> deferred;
  {
    std::lock_guard<std::mutex> lock(events_.mu);
    deferred = events_.deferred;
  }
  // Answer in reverse order; each request's id names its answer; the first one fails.
  for (int i = kThreads - 1; i >= 0; --i) {
    auto [peer, id] = deferred[i];
    if (i == 0) {
      server_->fail(peer, id, "request " + std::to_string(id) + " failed");
    } else {
      server_->respond(peer, id, bytes("answer to " + std::to_string(id)));
    }
  }
  for (auto& t : threads) t.join();
  for (const auto& [peer, id] : deferred) {
    const std::string expected = id == deferred[0].second
                                     ? "request " + std::to_string(id) + " failed"
                                     : "answer to " + std::to_string(id);
    EXPECT_EQ(std::count_if(answers.begin(), answers.end(),
                            [&](const std::string& a) {
                              return a == expected || (a.rfind("refused: ", 0) == 0 &&
                                                       a.find(expected) != std::string::npos);
                            }),
              1)
        << expected;
  }
  // A request nobody answers times out; the connection stays usable.
  EXPECT_THROW(c->request(bytes("defer:never"), 200ms), Timeout);
  EXPECT_EQ(text(c->request(bytes("after"))), "echo:after");
  // A handler that throws refuses the request, naming why.
  try {
    c->request(bytes("fail"));
    FAIL() << "the handler refused it";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no such key 'fail'"), std::string::npos) << e.what();
  }
}

TEST_F(ServiceTest, PushedMessagesReachTheRightPeerAndPeersSendToo) {
  auto a = client();
  auto b = client();
  const uint64_t ida = peer_id(*a), idb = peer_id(*b);
  ASSERT_NE(ida, idb);
  server_->send(ida, bytes("for a"));
  server_->send(idb, bytes("for b"));
  server_->send(ida, bytes("for a, again"));
  EXPECT_EQ(text(a->receive(10s).value()), "for a");
  EXPECT_EQ(text(a->receive(10s).value()), "for a, again");
  EXPECT_EQ(text(b->receive(10s).value()), "for b");
  EXPECT_FALSE(b->receive(50ms).has_value()) << "nothing else was sent to b";
  a->send(bytes("from a"));
  b->send(bytes("from b"));
  ASSERT_TRUE(events_.wait([&] { return events_.messages.size() == 2; }));
  std::lock_guard<std::mutex> lock(events_.mu);
  std::set<std::pair<uint64_t, std::string>> got(events_.messages.begin(), events_.messages.end());
  EXPECT_EQ(got, (std::set<std::pair<uint64_t, std::string>>{{ida, "from a"}, {idb, "from b"}}));
}

// A client that does not receive cannot be made to hold unbounded memory: past its inbox
// limit it drops the connection, keeps what it had, and then names the reason.
TEST_F(ServiceTest, AFullInboxDropsTheConnectionWithAClearError) {
  ClientOptions o = client_options(secret_);
  o.max_inbox_bytes = 2000;
  Client c(o);
  const uint64_t id = peer_id(c);
  Bytes kb(1000, 7);
  for (int i = 0; i < 3; ++i) server_->send(id, kb);
  // The answer comes after the pushes on the same connection: the third one overflowed first.
  try {
    c.request(bytes("ping"));
    FAIL() << "a third message fitted an inbox of 2000 bytes";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("max_inbox_bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.receive(10s).value(), kb);
  EXPECT_EQ(c.receive(10s).value(), kb);
  EXPECT_THROW(c.receive(10s), IoError);
}

TEST_F(ServiceTest, ServerShutdownFailsPendingRequestsNamingTheServer) {
  auto c = client();
  const std::string address = server_->address();
  std::string error;
  std::thread t([&] {
    try {
      c->request(bytes("defer:forever"));
    } catch (const IoError& e) {
      error = e.what();
    }
  });
  ASSERT_TRUE(events_.wait([&] { return events_.deferred.size() == 1; }));
  server_->stop();
  t.join();
  EXPECT_NE(error.find("service at " + address + " closed the connection"), std::string::npos)
      << error;
  EXPECT_FALSE(c->connected());
  EXPECT_THROW(c->request(bytes("again")), IoError);
  EXPECT_THROW(c->receive(1s), IoError);
}

TEST_F(ServiceTest, ConnectGivesUpWithATimeoutNamingTheService) {
  ClientOptions o = client_options(secret_);
  server_.reset();  // nothing listens on its port any more
  o.connect_timeout = 300ms;
  try {
    Client c(o);
    FAIL() << "nothing listens";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("service at 127.0.0.1:" + std::to_string(o.port)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ServiceTest, OversizePayloadsAreRefusedBeforeSending) {
  auto c = client();
  Bytes big((1 << 20) + 1);
  EXPECT_THROW(c->request(big), InvalidArgument);
  EXPECT_THROW(c->send(big), InvalidArgument);
  EXPECT_THROW(server_->send(peer_id(*c), big), InvalidArgument);
  // An answer over the limit fails that request, not the connection.
  big.resize(1 << 20);
  try {
    c->request(big);
    FAIL() << "the echo is 5 bytes over the limit";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds max_payload_bytes"), std::string::npos);
  }
  big.resize((1 << 20) - 5);  // an echo of exactly the limit passes
  EXPECT_EQ(c->request(big).size(), size_t(1) << 20);
}

// The service's frames, without sockets (the fuzzer checks the same on random bytes).
// Large requests and answers go out straight from their buffers (writev on the client,
// send-then-queue-the-rest on the server): several clients at once, each payload intact.
TEST_F(ServiceTest, LargePayloadsFromSeveralClientsAtOnceArriveIntact) {
  constexpr int kClients = 3, kRounds = 20;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kClients);
  for (int k = 0; k < kClients; ++k) {
    threads.emplace_back([&, k] {
      auto c = client();
      for (int r = 0; r < kRounds; ++r) {
        std::string s(size_t(600 << 10) + size_t(r * 4099 + k), 'a');
        for (size_t i = 0; i < s.size(); i += 97) s[i] = char('b' + (i / 97 + size_t(k + r)) % 20);
        const std::string answer = text(c->request(bytes(s)));
        if (answer != "echo:" + s && errors[size_t(k)].empty())
          errors[size_t(k)] = "client " + std::to_string(k) + " round " + std::to_string(r) +
                              ": a wrong answer of " + std::to_string(answer.size()) + " bytes";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(ServiceWire, FramesRoundTripAndMalformedOnesAreNamed) {
  Bytes f;
  encode_frame(Kind::kResponse, 42, bytes("abc"), &f);
  encode_frame(Kind::kMessage, 0, {}, &f);
  Frame a;
  auto r = parse_frame(f, 16, &a);
  ASSERT_EQ(r.status, ParseStatus::kOk);
  EXPECT_EQ(r.size, kHeaderBytes + kIdBytes + 3);
  EXPECT_EQ(a.kind, Kind::kResponse);
  EXPECT_EQ(a.id, 42u);
  EXPECT_EQ(text(Bytes(a.payload.begin(), a.payload.end())), "abc");
  r = parse_frame(std::span<const uint8_t>(f).subspan(r.size), 16, &a);
  ASSERT_EQ(r.status, ParseStatus::kOk);
  EXPECT_EQ(a.kind, Kind::kMessage);
  // Partial: the size of the whole frame once the header is in.
  EXPECT_EQ(parse_frame(std::span<const uint8_t>(f).first(4), 16, &a).size, 0u);
  r = parse_frame(std::span<const uint8_t>(f).first(kHeaderBytes), 16, &a);
  EXPECT_EQ(r.status, ParseStatus::kNeedMore);
  EXPECT_EQ(r.size, kHeaderBytes + kIdBytes + 3);
  // Over the limit, at the header.
  r = parse_frame(std::span<const uint8_t>(f).first(kHeaderBytes), 2, &a);
  EXPECT_EQ(r.status, ParseStatus::kMalformed);
  EXPECT_NE(r.error.find("exceeds the limit of 10"), std::string::npos) << r.error;
  // Bad magic at the first byte; unknown kind; a body too short for its id; a message with an id.
  EXPECT_EQ(parse_frame(bytes("x"), 16, &a).status, ParseStatus::kMalformed);
  Bytes g = f;
  g[4] = 9;
  EXPECT_NE(parse_frame(g, 16, &a).error.find("unknown frame kind byte 9"), std::string::npos);
  g = {};
  net::frame::finish(&g, net::frame::begin(&g, kMagic, uint8_t(Kind::kRequest)));
  EXPECT_NE(parse_frame(g, 16, &a).error.find("shorter than its 8-byte id"), std::string::npos);
  g = {};
  encode_frame(Kind::kMessage, 5, {}, &g);
  EXPECT_NE(parse_frame(g, 16, &a).error.find("message with id 5"), std::string::npos);
  // encode_head writes what encode_frame writes before the payload.
  g = {};
  encode_frame(Kind::kRequest, 7, bytes("payload"), &g);
  uint8_t head[kFrameHeadBytes];
  encode_head(Kind::kRequest, 7, 7, head);
  EXPECT_EQ(Bytes(head, head + kFrameHeadBytes), Bytes(g.begin(), g.begin() + kFrameHeadBytes));
}

}  // namespace
}  // namespace cohort::net::service
