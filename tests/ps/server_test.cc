// ParamServer and PsWorker in one process (ps/server.h, ps/worker.h): BSP averaging over one and
// two servers; ASP, SSP and backup workers; and every refusal the issue asks for: a worker with
// another model, a push of the wrong size, an unreachable server, a garbage client, a worker that
// leaves without goodbye.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <thread>

#include "cohort/comm/service/client.h"
#include "cohort/core/logging.h"
#include "cohort/optim/sgd.h"
#include "cohort/ps/server.h"
#include "cohort/ps/worker.h"
#include "cohort/rendezvous/hash_store.h"
#include "cohort/rendezvous/socket.h"

namespace cohort::ps {
namespace {

using namespace std::chrono_literals;

constexpr double kLr = 0.5;

NamedTensors model(int64_t second = 3) {
  return {{"w", from_vector({1, 2, 3, 4}, {2, 2})},
          {"b", from_vector(std::vector<float>(size_t(second), 1.0f), {second})}};
}

struct Job {
  explicit Job(int servers, int workers, Consistency c = {})
      : secret(rendezvous::Secret::generate()) {
    for (int i = 0; i < servers; ++i) {
      ServerOptions o;
      o.index = i;
      o.num_servers = servers;
      o.num_workers = workers;
      o.params = model();
      o.secret = secret;
      o.consistency = c;
      o.make_optimizer = [](optim::NamedParams p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SgdOptions{.lr = kLr});
      };
      o.make_schedule = [](int64_t) { return std::make_unique<optim::ConstantLr>(kLr); };
      this->servers.push_back(std::make_unique<ParamServer>(std::move(o)));
      store->set_string(server_key(i), this->servers.back()->address());
    }
  }
  WorkerOptions worker(int rank, int workers) const {
    return {.rank = rank,
            .num_workers = workers,
            .num_servers = int(servers.size()),
            .store = store,
            .secret = secret,
            .timeout = 5s};
  }
  rendezvous::Secret secret;
  std::shared_ptr<rendezvous::Store> store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::unique_ptr<ParamServer>> servers;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// Two workers push different gradients; both get init - lr * mean back, on 1 and 2 servers.
TEST(PsServer, BspAveragesTheWorkersGradientsOnOneAndTwoServers) {
  for (int servers : {1, 2}) {
    Job job(servers, 2);
    const Layout layout = layout_of(model());
    std::vector<std::vector<float>> got(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        PsWorker w(job.worker(rank, 2), layout);
        std::vector<float> values(7), grads(7, float(rank + 1));  // 1 and 2: mean 1.5
        w.pull(values.data());
        EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4, 1, 1, 1}));
        w.push_pull(0, grads.data(), values.data());
        got[size_t(rank)] = values;
        w.bye();
      });
    }
    for (auto& t : threads) t.join();
    const std::vector<float> want = {1 - 0.75f, 2 - 0.75f, 3 - 0.75f, 4 - 0.75f,
                                     1 - 0.75f, 1 - 0.75f, 1 - 0.75f};
    EXPECT_EQ(got[0], want) << servers << " servers";
    EXPECT_EQ(got[1], want) << servers << " servers";
    for (auto& s : job.servers) {
      s->wait(5s);  // every worker said bye
      EXPECT_EQ(s->step(), 1);
    }
  }
}

// Over three servers the worker's persistent per-server threads run every step: many steps of
// ASP give the exact SGD trajectory, and a refusal by every server is rethrown (server 0's).
TEST(PsServer, ManyStepsOverThreeServersAndTheirErrors) {
  Consistency asp;
  asp.mode = Mode::kAsp;
  Job job(3, 1, asp);
  const Layout layout = layout_of(model());
  PsWorker w(job.worker(0, 1), layout);
  std::vector<float> values(7), grads(7, 0.25f);
  w.pull(values.data());
  for (int step = 0; step < 40; ++step) w.push_pull(step, grads.data(), values.data());
  const std::vector<float> init = {1, 2, 3, 4, 1, 1, 1};
  for (size_t i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(values[i], init[i] - 40 * 0.25f * float(kLr));
  std::string m = message_of([&] { w.push_pull(7, grads.data(), values.data()); });
  EXPECT_NE(m.find("parameter server 0"), std::string::npos) << m;
  EXPECT_NE(m.find("for step 7, expected step 40"), std::string::npos) << m;
  w.bye();
}

TEST(PsServer, AWorkerWithAnotherModelIsRefusedNamingTheParameterAndTheRank) {
  Job job(1, 2);
  std::string m = message_of([&] { PsWorker w(job.worker(1, 2), layout_of(model(5))); });
  EXPECT_NE(m.find("worker 1's model differs from the server's at parameter 1: worker 1 has "
                   "'b' (5 elements)"),
            std::string::npos)
      << m;
}

TEST(PsServer, APushOfTheWrongSizeOrStepIsRefusedNamingTheWorkerAndTheRange) {
  Job job(2, 1);
  PsWorker w(job.worker(0, 1), layout_of(model()));  // hello on both servers
  comm::service::Client raw(
      {.port = uint16_t(std::stoi(job.servers[0]->address().substr(10))),  // "127.0.0.1:"
       .secret = job.secret});
  // Not said hello on this connection: refused.
  std::vector<float> g(7, 0.0f);
  EXPECT_NE(message_of([&] {
              raw.request(encode_push(0, 0, {0, 3}, g.data()));
            }).find("has not said hello"),
            std::string::npos);
  raw.request(encode_hello({0, 1, 0, layout_of(model())}));
  std::string m = message_of([&] { raw.request(encode_push(0, 0, {0, 2}, g.data())); });
  EXPECT_NE(m.find("parameter server 0: worker 0 pushed 2 values for keys [0, 2); this server "
                   "owns keys [0, 3)"),
            std::string::npos)
      << m;
  m = message_of([&] { raw.request(encode_push(0, 4, {0, 3}, g.data())); });
  EXPECT_NE(m.find("worker 0 pushed keys [0, 3) for step 4, the server is at step 0"),
            std::string::npos)
      << m;
}

TEST(PsServer, AnUnreachableServerIsAnErrorWithinTheTimeoutNamingIt) {
  Job job(1, 1);
  WorkerOptions o = job.worker(0, 1);
  o.num_servers = 2;  // server 1 never publishes its address
  o.timeout = 300ms;
  auto t0 = std::chrono::steady_clock::now();
  std::string m = message_of([&] { PsWorker w(o, layout_of(model())); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(m.find("parameter server 1 did not publish its address (ps/server/1)"),
            std::string::npos)
      << m;
  // Published, but nobody listens there any more.
  std::string dead;
  {
    Job gone(1, 1);
    dead = gone.servers[0]->address();
  }
  job.store->set_string(server_key(1), dead);
  t0 = std::chrono::steady_clock::now();
  m = message_of([&] { PsWorker w(o, layout_of(model())); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(m.find("parameter server 1 at " + dead), std::string::npos) << m;
}

TEST(PsServer, AMalformedPublishedAddressIsAnErrorNamingIt) {
  Job job(1, 1);
  WorkerOptions o = job.worker(0, 1);
  o.num_servers = 2;
  o.timeout = 300ms;
  for (const char* bad : {"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ":41000"}) {
    job.store->set_string(server_key(1), bad);
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
  rendezvous::Fd junk = rendezvous::connect_tcp("127.0.0.1", uint16_t(std::stoi(a.substr(10))),
                                                rendezvous::deadline_after(5s), "test");
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

TEST(PsServer, AWorkerThatLeavesWithoutGoodbyeIsNamed) {
  Job job(1, 2);
  PsWorker w(job.worker(1, 2), layout_of(model()));
  w.abandon();  // what a failing worker's strategy does while its exception unwinds
  std::string m = message_of([&] { job.servers[0]->wait(5s); });
  EXPECT_NE(m.find("parameter server 0: worker 1"), std::string::npos) << m;
  EXPECT_NE(m.find("left without saying goodbye"), std::string::npos) << m;
}

// ASP: each push is applied on arrival and answered at once; the second worker's push is one
// update stale (it last received the initial values). With staleness_lr, worker 0's second
// push, two updates stale, moves half as far (lr / 2); one update stale is not scaled.
TEST(PsServer, AspAppliesEachPushOnArrivalAndReportsItsStaleness) {
  for (bool scaled : {false, true}) {
    Job job(1, 2, {.mode = Mode::kAsp, .staleness_lr = scaled});
    const Layout layout = layout_of(model());
    PsWorker w0(job.worker(0, 2), layout), w1(job.worker(1, 2), layout);
    std::vector<float> v(7), g(7, 1.0f);
    w0.pull(v.data());
    w1.pull(v.data());
    TransferStats a = w0.push_pull(0, g.data(), v.data());
    EXPECT_EQ(v[0], 1 - 0.5f);
    EXPECT_EQ(a.reply.staleness, 0);
    TransferStats b = w1.push_pull(0, g.data(), v.data());
    EXPECT_EQ(v[0], 1 - 1.0f);
    EXPECT_EQ(b.reply.staleness, 1);
    w1.push_pull(1, g.data(), v.data());  // worker 0 is now two updates behind
    TransferStats c = w0.push_pull(1, g.data(), v.data());
    EXPECT_EQ(c.reply.staleness, 2);
    EXPECT_EQ(v[0], scaled ? 1 - 1.5f - 0.25f : 1 - 2.0f);
    w0.bye();
    w1.bye();
    job.servers[0]->wait(5s);
    EXPECT_EQ(job.servers[0]->stats().updates, 4);
    EXPECT_EQ(job.servers[0]->stats().max_staleness, 2);
  }
}

// SSP with staleness 1: worker 0 may run one step ahead of worker 1; its second push is held
// until worker 1 pushes, and says how long it was held.
TEST(PsServer, SspHoldsTheFastWorkersAnswerUntilTheSlowestCatchesUp) {
  Job job(2, 2, {.mode = Mode::kSsp, .staleness = 1});
  const Layout layout = layout_of(model());
  PsWorker w0(job.worker(0, 2), layout), w1(job.worker(1, 2), layout);
  std::vector<float> v0(7), v1(7), g(7, 1.0f);
  w0.push_pull(0, g.data(), v0.data());  // clock 1, slowest 0: within 1
  auto held = std::async(std::launch::async, [&] { return w0.push_pull(1, g.data(), v0.data()); });
  EXPECT_EQ(held.wait_for(200ms), std::future_status::timeout);  // clock 2, slowest 0: held
  w1.push_pull(0, g.data(), v1.data());
  TransferStats s = held.get();
  EXPECT_GT(s.reply.held_s, 0.1);
  EXPECT_EQ(s.reply.lead, 1);
  w0.bye();  // a finished worker holds no one back
  w1.push_pull(1, g.data(), v1.data());
  w1.push_pull(2, g.data(), v1.data());
  w1.bye();
  for (auto& srv : job.servers) {
    srv->wait(5s);
    EXPECT_EQ(srv->stats().held, 1);
    EXPECT_EQ(srv->stats().updates, 5);
  }
}

// BSP with one backup worker of three: step 0 is applied with the first two pushes; the third
// is dropped and answered with step 0's values.
TEST(PsServer, BspWithABackupWorkerDropsTheLatePushAndStillAnswersIt) {
  Job job(1, 3, {.backup_workers = 1});
  const Layout layout = layout_of(model());
  PsWorker w0(job.worker(0, 3), layout), w1(job.worker(1, 3), layout), w2(job.worker(2, 3), layout);
  std::vector<float> v0(7), v1(7), v2(7), g(7, 1.0f), g2(7, 2.0f);
  auto first = std::async(std::launch::async, [&] { return w0.push_pull(0, g.data(), v0.data()); });
  w1.push_pull(0, g2.data(), v1.data());
  first.get();
  EXPECT_EQ(v0[0], 1 - 0.5f * 1.5f);  // the mean of the first two
  EXPECT_EQ(v1, v0);
  TransferStats late = w2.push_pull(0, g.data(), v2.data());
  EXPECT_EQ(late.reply.dropped, 1);
  EXPECT_EQ(v2, v0);
  for (PsWorker* w : {&w0, &w1, &w2}) w->bye();
  job.servers[0]->wait(5s);
  EXPECT_EQ(job.servers[0]->stats().dropped, 1);
  EXPECT_EQ(job.servers[0]->step(), 1);
}

}  // namespace
}  // namespace cohort::ps
