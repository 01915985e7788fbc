// A parameter server's network faults, as the issue asks (ps/server.h, ps/worker.h): an
// unreachable server, one that never answers, a malformed published address: each an error
// naming the server within the deadline; a garbage client on a server's port is refused and
// logged while the workers go on.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "cohort/core/logging.h"
#include "cohort/net/service/client.h"
#include "cohort/net/service/server.h"
#include "cohort/net/socket.h"
#include "cohort/ps/server.h"
#include "cohort/ps/worker.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/ps/ps_job.h"

namespace cohort::ps {
namespace {

using namespace std::chrono_literals;

TEST(PsServer, AnUnreachableServerIsAnErrorWithinTheTimeoutNamingIt) {
  Job job(1, 1);
  WorkerOptions o = job.worker(0, 1);
  o.num_servers = 2;  // server 1 never publishes its address
  o.timeout = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  std::string m = message_of([&] { PsWorker w(o, layout_of(model())); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(m.find("parameter server 1 did not publish its address (ps/server/1/generation)"),
            std::string::npos)
      << m;
  // Published, but nobody listens there any more.
  std::string dead;
  {
    Job gone(1, 1);
    dead = gone.servers[0]->address();
  }
  publish_server(*job.store, 1, dead);
  t0 = std::chrono::steady_clock::now();
  m = message_of([&] { PsWorker w(o, layout_of(model())); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(m.find("parameter server 1 at " + dead), std::string::npos) << m;
}

// A parameter server that accepts connections and passes the handshake, then never answers:
// not the hello (answer_hello false), or nothing after it. Its requests stay pending forever.
std::unique_ptr<net::service::Server> silent_server(const net::Secret& secret, bool answer_hello) {
  net::service::Handlers h;
  h.on_request = [answer_hello](const net::service::Peer&, uint64_t,
                                Bytes q) -> std::optional<Bytes> {
    if (answer_hello && peek_kind(q) == MsgKind::kHello) return encode_hello_reply({});
    return std::nullopt;
  };
  return std::make_unique<net::service::Server>(
      net::service::ServerOptions{.secret = secret, .name = "silent server"}, std::move(h));
}

// What `f` throws: a Timeout within 3 s (the deadline is 300 ms), whose message is returned.
std::string timeout_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string m = "(no error)";
  try {
    f();
  } catch (const Timeout& e) {
    m = e.what();
  } catch (const std::exception& e) {
    m = std::string("not a Timeout: ") + e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << m;
  return m;
}

// The "a server that never answers": server 1 of 2 accepts the connection (and the
// handshake, and the hello) but never answers a request. The worker's request fails with
// Timeout within its deadline naming the server; so does a hello that is never answered, and
// a listener that never even starts the handshake.
TEST(PsServer, AServerThatNeverAnswersIsATimeoutNamingIt) {
  Job job(2, 1);
  WorkerOptions o = job.worker(0, 1);
  o.timeout = 300ms;
  const Layout layout = layout_of(model());
  auto silent = silent_server(job.secret, /*answer_hello=*/true);
  publish_server(*job.store, 1, silent->address());
  const std::string who = "parameter server 1 at " + silent->address();
  PsWorker w(o, layout);  // the hellos are answered
  std::vector<float> values(7), grads(7, 1.0f);
  std::string m = timeout_of([&] { w.pull(values.data()); });
  EXPECT_NE(m.find(who + ": no response to request"), std::string::npos) << m;
  m = timeout_of([&] { w.push_pull(0, grads.data(), values.data()); });
  EXPECT_NE(m.find(who + ": no response to request"), std::string::npos) << m;
  w.abandon();

  // A fresh job for each of the others: server 0 of this one is past step 0 for worker 0.
  Job job2(2, 1);
  o = job2.worker(0, 1);
  o.timeout = 300ms;
  auto mute = silent_server(job2.secret, /*answer_hello=*/false);
  publish_server(*job2.store, 1, mute->address());
  m = timeout_of([&] { PsWorker never(o, layout); });
  EXPECT_NE(m.find("parameter server 1 at " + mute->address() + ": no response to request"),
            std::string::npos)
      << m;

  // Listening, never accepting: the TCP connection is made (the backlog), the handshake never.
  net::Listener deaf = net::listen_tcp("127.0.0.1", 0, 8);
  const std::string deaf_address = "127.0.0.1:" + std::to_string(deaf.port);
  Job job3(2, 1);
  o = job3.worker(0, 1);
  o.timeout = 300ms;
  publish_server(*job3.store, 1, deaf_address);
  m = timeout_of([&] { PsWorker never(o, layout); });
  EXPECT_NE(m.find("parameter server 1 at " + deaf_address), std::string::npos) << m;
}

TEST(PsServer, AMalformedPublishedAddressIsAnErrorNamingIt) {
  Job job(1, 1);
  WorkerOptions o = job.worker(0, 1);
  o.num_servers = 2;
  o.timeout = 300ms;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ":41000"}) {
    publish_server(*job.store, 1, bad);
    std::string m = message_of([&] { PsWorker w(o, layout_of(model())); });
    EXPECT_NE(m.find(std::string("parameter server 1 published a malformed address '") + bad),
              std::string::npos)
        << m;
  }
}

TEST(PsServer, AGarbageClientIsRefusedWhileTheWorkersGoOn) {
  Job job(1, 1);
  PsWorker w(job.worker(0, 1), layout_of(model()));
  const std::string& a = job.servers[0]->address();
  net::Fd junk = net::connect_tcp("127.0.0.1", uint16_t(std::stoi(a.substr(10))),
                                  net::deadline_after(5s), "test");
  log::ScopedCapture logs;
  const char garbage[] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(junk.get(), garbage, sizeof garbage, MSG_NOSIGNAL), 0);
  for (int i = 0; i < 500 && logs.count("not a cohort handshake") == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(logs.count("refused 127.0.0.1"), 1u) << logs.text();
  std::vector<float> values(7), grads(7, 1.0f);
  w.push_pull(0, grads.data(), values.data());
  EXPECT_EQ(values[0], 1 - float(kLr));
  w.bye();
  job.servers[0]->wait(5s);
}

}  // namespace
}  // namespace cohort::ps
