// ParamServer and PsWorker in one process (ps/server.h, ps/worker.h): BSP averaging over one and
// two servers, and every refusal the issue asks for: a worker with another model, a push of the
// wrong size, an unreachable server, a garbage client, a worker that leaves without goodbye.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
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
  explicit Job(int servers, int workers) : secret(rendezvous::Secret::generate()) {
    for (int i = 0; i < servers; ++i) {
      ServerOptions o;
      o.index = i;
      o.num_servers = servers;
      o.num_workers = workers;
      o.params = model();
      o.secret = secret;
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

}  // namespace
}  // namespace cohort::ps
