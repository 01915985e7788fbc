// ParamServer and PsWorker in one process (ps/server.h, ps/worker.h): BSP averaging over one and
// two servers; ASP, SSP and backup workers; the traffic counters; refusals of a worker with
// another model and of a push of the wrong size; a worker that leaves without goodbye. The
// network's faults (an unreachable or silent server, garbage) are in server_faults_test.cc.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "cohort/core/logging.h"
#include "cohort/net/service/client.h"
#include "cohort/net/socket.h"
#include "cohort/optim/sgd.h"
#include "cohort/ps/server.h"
#include "cohort/ps/worker.h"
#include "cohort/rendezvous/hash_store.h"
#include "tests/ps/ps_job.h"

namespace cohort::ps {
namespace {

using namespace std::chrono_literals;

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
      // Two pushes of one step: the first waits for the second (depth 1, then 0).
      const ServerTraffic t = s->stats().traffic;
      EXPECT_EQ(t.queue_depth_max, 1);
      EXPECT_EQ(t.queue_depth_mean(), 0.5);
      // In: 2 pushes of the range (and hellos, pulls, byes); out: 2 answers and 2 pulls.
      const uint64_t range_bytes = uint64_t(s->range().size()) * sizeof(float);
      EXPECT_GT(t.bytes_in, 2 * range_bytes);
      EXPECT_GT(t.bytes_out, 4 * range_bytes);
      EXPECT_LT(t.bytes_out, 4 * range_bytes + 4 * 64);  // 64: a generous header
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
  Job job(2, 2);
  PsWorker w(job.worker(1, 2), layout_of(model()));  // hello on both servers
  net::service::Client raw(
      {.port = uint16_t(std::stoi(job.servers[0]->address().substr(10))),  // "127.0.0.1:"
       .secret = job.secret});
  // Not said hello on this connection: refused.
  std::vector<float> g(7, 0.0f);
  EXPECT_NE(message_of([&] {
              raw.request(encode_push(0, 0, {0, 3}, g.data()));
            }).find("has not said hello"),
            std::string::npos);
  std::string m = message_of([&] { raw.request(encode_hello({1, 2, 0, layout_of(model())})); });
  EXPECT_NE(m.find("worker 1 said hello twice (it is already connected)"), std::string::npos) << m;
  raw.request(encode_hello({0, 2, 0, layout_of(model())}));
  m = message_of([&] { raw.request(encode_push(0, 0, {0, 2}, g.data())); });
  EXPECT_NE(m.find("parameter server 0: worker 0 pushed 2 values for keys [0, 2); this server "
                   "owns keys [0, 3)"),
            std::string::npos)
      << m;
  m = message_of([&] { raw.request(encode_push(0, 4, {0, 3}, g.data())); });
  EXPECT_NE(m.find("worker 0 pushed keys [0, 3) for step 4, the server is at step 0"),
            std::string::npos)
      << m;
}

TEST(PsServer, AWorkerThatLeavesWithoutGoodbyeIsNamed) {
  Job job(1, 2);
  PsWorker w(job.worker(1, 2), layout_of(model()));
  w.abandon();  // what a failing worker's strategy does while its exception unwinds
  std::string m = message_of([&] { job.servers[0]->wait(5s); });
  EXPECT_NE(m.find("parameter server 0: worker 1"), std::string::npos) << m;
  EXPECT_NE(m.find("left without saying goodbye"), std::string::npos) << m;
}

// With rejoin_timeout a worker that left without goodbye may come back (restarted alone): its
// unanswered push is forgotten and it resumes at the step being gathered; one that does not
// come back in time is named.
TEST(PsServer, AWorkerThatLeftRejoinsWithinTheTimeoutOrIsNamed) {
  Job job(1, 2, {}, 5s);
  PsWorker w0(job.worker(0, 2), layout_of(model()));
  std::vector<float> v0(7), v1(7), grads(7, 1.0f);
  {
    PsWorker gone(job.worker(1, 2), layout_of(model()));
    gone.abandon();
  }
  auto first = std::async(std::launch::async, [&] { w0.push_pull(0, grads.data(), v0.data()); });
  WorkerOptions o = job.worker(1, 2);
  o.rejoin = true;
  PsWorker back(o, layout_of(model()));
  EXPECT_EQ(back.start_step(), 0);
  back.push_pull(0, grads.data(), v1.data());
  first.get();
  EXPECT_EQ(v0, v1);
  EXPECT_EQ(v0[0], 1 - float(kLr));
  w0.bye();
  back.bye();
  job.servers[0]->wait(5s);

  Job late(1, 2, {}, 200ms);
  PsWorker stays(late.worker(0, 2), layout_of(model()));
  PsWorker(late.worker(1, 2), layout_of(model())).abandon();
  std::string m = message_of([&] { late.servers[0]->wait(5s); });
  EXPECT_NE(m.find("worker 1 left without saying goodbye and did not rejoin within 200 ms"),
            std::string::npos)
      << m;
}

// BSP with a backup worker goes on without a worker that starts late: that one joins at the
// step being gathered (a fresh worker otherwise must find the servers at step 0).
TEST(PsServer, BspWithABackupWorkerLetsALateWorkerJoinWhereTheServersAre) {
  Consistency c;
  c.backup_workers = 1;
  Job job(2, 2, c);
  PsWorker early(job.worker(0, 2), layout_of(model()));
  std::vector<float> values(7), grads(7, 1.0f);
  early.push_pull(0, grads.data(), values.data());
  early.push_pull(1, grads.data(), values.data());
  WorkerOptions o = job.worker(1, 2);
  o.consistency = c;
  PsWorker late(o, layout_of(model()));
  EXPECT_EQ(late.start_step(), 2);
  early.bye();
  late.bye();
  for (auto& s : job.servers) s->wait(5s);
}

// ASP's learning-rate schedule follows the server's global step (its updates / N), not the
// pushing worker's step: a worker far behind gets the job's current rate.
TEST(PsServer, AspScheduleFollowsTheServersGlobalStep) {
  struct StepIsLr : optim::LrSchedule {
    double lr_at(int64_t step) const override { return 0.5 * double(step + 1); }
  };
  Consistency c;
  c.mode = Mode::kAsp;
  ServerOptions o;
  o.num_workers = 2;
  o.params = model();
  o.secret_policy = net::SecretPolicy::kAllowInsecure;
  o.consistency = c;
  o.make_optimizer = [](optim::NamedParams p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SgdOptions{.lr = kLr});
  };
  o.make_schedule = [](int64_t) { return std::make_unique<StepIsLr>(); };
  ParamServer server(std::move(o));
  auto store = std::make_shared<rendezvous::HashStore>();
  publish_server(*store, 0, server.address());
  auto options = [&](int rank) {
    WorkerOptions w{.rank = rank, .num_workers = 2, .num_servers = 1, .store = store};
    w.secret_policy = net::SecretPolicy::kAllowInsecure;
    w.consistency = c;
    return w;
  };
  PsWorker fast(options(0), layout_of(model())), slow(options(1), layout_of(model()));
  std::vector<float> v(7), ones(7, 1.0f);
  for (int64_t step = 0; step < 4; ++step) fast.push_pull(step, ones.data(), v.data());
  // 4 updates of 2 workers: global step 2, lr 1.5 for the slow worker's push of its step 0
  // (the pusher's step would give 0.5).
  const float before = v[0];
  slow.push_pull(0, ones.data(), v.data());
  EXPECT_FLOAT_EQ(v[0], before - 1.5f);
  fast.bye();
  slow.bye();
  server.wait(5s);
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

// ASP: worker 0 finishes first; finish() returns only once worker 1 said bye, with the values
// its last push went into (what rank 0 then evaluates), on two servers; the servers stay up
// until it has them.
TEST(PsServer, FinishWaitsForEveryWorkerAndReturnsTheFinalValues) {
  Job job(2, 2, {.mode = Mode::kAsp});
  const Layout layout = layout_of(model());
  PsWorker w0(job.worker(0, 2), layout), w1(job.worker(1, 2), layout);
  std::vector<float> v0(7), v1(7), g(7, 1.0f), final(7, -99.0f);
  w0.pull(v0.data());
  w1.pull(v1.data());
  w0.push_pull(0, g.data(), v0.data());
  std::atomic<bool> finished{false};
  std::thread t([&] {
    w0.finish(final.data());
    finished = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(finished) << "finish() returned before worker 1 was done";
  w1.push_pull(0, g.data(), v1.data());
  w1.push_pull(1, g.data(), v1.data());  // the last update
  w1.bye();
  t.join();
  EXPECT_EQ(final, v1);
  EXPECT_EQ(v1[0], 1 - 3 * 0.5f);
  for (auto& s : job.servers) s->wait(5s);
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

namespace cohort::ps {
namespace {

// A restarted server resumes where its checkpoint was (a worker's bye makes one), tells a
// worker's hello where to resume, and refuses a checkpoint of another job shape, naming it.
TEST(PsServer, ARestartedServerResumesFromItsCheckpointAndRefusesAnotherJobs) {
  const std::string dir = ::testing::TempDir() + "ps_server_ckpt_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto options = [&](int workers, bool restore) {
    ServerOptions o;
    o.num_workers = workers;
    o.params = model();
    o.make_optimizer = [](optim::NamedParams p) {
      return std::make_unique<optim::SGD>(std::move(p), optim::SgdOptions{.lr = kLr});
    };
    o.make_schedule = [](int64_t) { return std::make_unique<optim::ConstantLr>(kLr); };
    o.consistency.mode = Mode::kAsp;
    o.secret_policy = net::SecretPolicy::kAllowInsecure;
    o.ckpt_dir = dir;
    o.ckpt_every = 1;
    o.restore = restore;
    return o;
  };
  auto store = std::make_shared<rendezvous::HashStore>();
  WorkerOptions w{.rank = 0, .num_workers = 1, .num_servers = 1, .store = store, .timeout = 5s};
  w.secret_policy = net::SecretPolicy::kAllowInsecure;
  std::vector<float> values(7), grads(7, 1.0f);
  {
    ParamServer first(options(1, false));
    publish_server(*store, 0, first.address());
    PsWorker worker(w, layout_of(model()));
    worker.push_pull(0, grads.data(), values.data());
    worker.push_pull(1, grads.data(), values.data());
    worker.bye();
    first.wait(5s);
  }
  ParamServer again(options(1, true));
  publish_server(*store, 0, again.address());
  EXPECT_EQ(again.stats().updates, 0);
  {
    // The checkpoint holds both pushes and the bye: a new worker of the same job is told its
    // pushes would resume at step 2, which a fresh worker (at step 0) cannot do.
    std::string m = message_of([&] { PsWorker late(w, layout_of(model())); });
    EXPECT_NE(m.find("expects worker 0's push of step 2"), std::string::npos) << m;
  }
  std::string m = message_of([&] { ParamServer other(options(2, true)); });
  EXPECT_NE(m.find("the number of workers is 1, this server has 2"), std::string::npos) << m;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort::ps
