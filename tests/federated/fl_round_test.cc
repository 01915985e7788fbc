// FlServer + Coordinator + FlClient in one process (clients as threads, loopback, the job
// secret): aggregation weights, dropouts, retries and every refusal a bad client gets.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <future>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/federated/client.h"
#include "cohort/federated/coordinator.h"
#include "cohort/federated/server.h"
#include "cohort/net/secret.h"

namespace cohort::federated {
namespace {

using namespace std::chrono_literals;

ps::Layout test_layout(int64_t a = 6, int64_t b = 4) {
  ps::Layout l;
  l.params = {{"w", a, 0, 0}, {"b", b, a, 1}};
  l.total = a + b;
  return l;
}

struct Job {
  net::Secret secret = net::Secret::generate();
  std::unique_ptr<FlServer> server;
  std::unique_ptr<Coordinator> coord;
  std::vector<std::unique_ptr<FlClient>> clients;
  std::vector<std::thread> threads;
  std::deque<ClientSummary> summaries;  // stable addresses: each thread writes its own

  Job(CoordinatorOptions o, const std::string& strategy = "fedavg") {
    FlServerOptions so;
    so.service.secret = secret;
    so.layout = test_layout();
    so.expected_clients = o.clients;
    server = std::make_unique<FlServer>(so);
    coord = std::make_unique<Coordinator>(*server, strategy_registry().make(strategy, {}), o,
                                          std::vector<float>(size_t(so.layout.total), 1.f));
  }
  FlClientOptions client_options(uint32_t id) const {
    FlClientOptions o;
    o.service.port = server->service().port();
    o.service.secret = secret;
    o.id = id;
    o.num_samples = 10 * (id + 1);
    o.layout = test_layout();
    o.reconnect_timeout = 10s;
    o.poll = 20ms;
    return o;
  }
  void start(FlClientOptions o, LocalTrainFn fn) {
    summaries.emplace_back();
    clients.push_back(std::make_unique<FlClient>(o, std::move(fn)));
    FlClient* c = clients.back().get();
    ClientSummary* s = &summaries.back();
    threads.emplace_back([c, s] {
      try {
        *s = c->run();
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  // Waits until the started clients said hello.
  void ready() {
    ASSERT_EQ(server->wait_for_clients(int(clients.size()), Clock::now() + 10s),
              int(clients.size()));
  }
  ~Job() {
    server->say_bye();
    for (auto& c : clients) c->stop();
    for (auto& t : threads) t.join();
  }
};

// Client i moves every parameter by (i + 1) and reports 10 (i + 1) samples.
LocalTrainFn constant_delta(uint32_t id) {
  return [id](const Task& t) {
    LocalResult r;
    r.delta.assign(t.params.size(), float(id + 1));
    r.num_samples = 10 * (id + 1);
    r.loss = 0.5;
    return r;
  };
}

CoordinatorOptions options(int clients) {
  CoordinatorOptions o;
  o.clients = clients;
  o.fraction = 1.0;
  o.min_clients = 2;
  o.round_timeout = 5s;
  o.wait_clients = 10s;
  o.max_retries = 1;
  return o;
}

TEST(FlRound, FedAvgWeighsUpdatesBySamples) {
  Job job(options(3));
  for (uint32_t i = 0; i < 3; ++i) job.start(job.client_options(i), constant_delta(i));
  job.ready();
  RoundRecord rec = job.coord->run_round(0);
  EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(rec.dropped.empty());
  // (10*1 + 20*2 + 30*3) / 60 = 140 / 60
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 140.f / 60.f, 1e-6);
  EXPECT_GT(rec.bytes_out_per_client, 10 * sizeof(float));
  EXPECT_GT(rec.bytes_in_per_client, 10 * sizeof(float));
  EXPECT_DOUBLE_EQ(rec.train_loss, 0.5);
}

TEST(FlRound, AClientPastTheDeadlineIsLeftOutAndTheRoundCompletes) {
  CoordinatorOptions o = options(3);
  o.round_timeout = 1500ms;
  Job job(o);
  job.start(job.client_options(0), constant_delta(0));
  job.start(job.client_options(1), constant_delta(1));
  job.start(job.client_options(2), [](const Task& t) {
    std::this_thread::sleep_for(3s);  // a straggler
    return constant_delta(2)(t);
  });
  job.ready();
  const auto start = Clock::now();
  RoundRecord rec = job.coord->run_round(0);
  EXPECT_LT(Clock::now() - start, 2500ms);
  EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1}));
  ASSERT_EQ(rec.dropped.size(), 1u);
  EXPECT_EQ(rec.dropped[0].id, 2u);
  EXPECT_NE(rec.dropped[0].why.find("deadline"), std::string::npos) << rec.dropped[0].why;
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 50.f / 30.f, 1e-6);
}

TEST(FlRound, SamplingTakesTheFractionDeterministically) {
  CoordinatorOptions o = options(10);
  o.fraction = 0.5;
  Job job(o);
  std::vector<uint32_t> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<uint32_t> a = job.coord->sample(all, 3, 0);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a, job.coord->sample(all, 3, 0));
  EXPECT_NE(a, job.coord->sample(all, 4, 0));
  EXPECT_NE(a, job.coord->sample(all, 3, 1));
}

TEST(FlRound, FedAvgMCarriesServerMomentum) {
  Job job(options(2), "fedavgm");
  for (uint32_t i = 0; i < 2; ++i) job.start(job.client_options(i), constant_delta(i));
  job.ready();
  job.coord->run_round(0);
  job.coord->run_round(1);
  // mean delta m = (10 + 40) / 30 each round; v1 = m, v2 = 0.9 m + m; w = 1 + v1 + v2
  const float m = 50.f / 30.f;
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + m + 1.9f * m, 1e-5);
}

// A client speaking the protocol by hand.
struct RawClient {
  net::service::Client c;
  RawClient(const Job& job)
      : c([&] {
          net::service::ClientOptions o;
          o.port = job.server->service().port();
          o.secret = job.secret;
          o.timeout = 5s;
          return o;
        }()) {}
  Welcome hello(uint32_t id, ps::Layout layout = test_layout()) {
    return decode_welcome(c.request(encode(Hello{kProtocolVersion, id, 5, layout})), "welcome");
  }
  Task next_task() {
    for (int i = 0; i < 100; ++i) {
      auto m = c.receive(100ms);
      if (m && peek_kind(*m, "test") == MsgKind::kTask) return decode_task(*m, "test");
    }
    throw Timeout("no task");
  }
};

void expect_refused(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "not refused; expected an error with '" << words << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(FlRound, RefusesAnotherModel) {
  Job job(options(2));
  RawClient raw(job);
  expect_refused([&] { raw.hello(0, test_layout(7, 4)); }, "another model");
  expect_refused([&] { raw.hello(0, test_layout(6, 4 + 1)); }, "'b'");
  EXPECT_GE(job.server->refused(), 2u);
}

TEST(FlRound, RefusesReplayedStaleTruncatedAndOversizedUpdatesAndTheRoundGoesOn) {
  Job job(options(3));
  job.start(job.client_options(1), constant_delta(1));
  std::promise<void> release;  // client 2 keeps the round open until client 0's checks are done
  std::shared_future<void> released = release.get_future().share();
  job.start(job.client_options(2), [released](const Task& t) {
    released.wait_for(10s);
    return constant_delta(2)(t);
  });
  job.ready();
  RawClient raw(job);
  raw.hello(0);
  std::thread coordinator([&] {
    try {
      RoundRecord rec = job.coord->run_round(0);
      EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1, 2}));
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  const Task t = raw.next_task();
  Update u{0, t.round, t.task_id, 10, 0.1, 0, std::vector<float>(10, 1.f)};
  Update wrong_id = u;
  wrong_id.task_id ^= 1;
  expect_refused([&] { raw.c.request(encode(wrong_id)); }, "replayed");
  Update stale = u;
  stale.round = t.round + 7;
  expect_refused([&] { raw.c.request(encode(stale)); }, "stale or replayed");
  Bytes truncated = encode(u);
  truncated.resize(truncated.size() - 3);
  expect_refused([&] { raw.c.request(truncated); }, "truncated");
  Bytes oversized = encode(u);
  oversized.push_back(0);
  expect_refused([&] { raw.c.request(oversized); }, "unexpected bytes");
  Update short_delta = u;
  short_delta.delta.resize(9);
  expect_refused([&] { raw.c.request(encode(short_delta)); }, "the model has 10");
  raw.c.request(encode(u));
  expect_refused([&] { raw.c.request(encode(u)); }, "twice");
  release.set_value();
  coordinator.join();
  EXPECT_GE(job.server->refused(), 6u);
}

TEST(FlRound, TooFewClientsRetriesThenFailsWithAClearError) {
  CoordinatorOptions o = options(3);
  o.min_clients = 3;
  o.wait_clients = 300ms;
  o.round_timeout = 500ms;
  o.max_retries = 1;
  Job job(o);
  job.start(job.client_options(0), constant_delta(0));
  try {
    job.coord->run_round(0);
    ADD_FAILURE() << "no error";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("fl.min_clients = 3"), std::string::npos) << e.what();
  }
}

TEST(FlRound, SecureAggregationGivesTheWeightedMeanAndSurvivesClientsDyingAfterSharingKeys) {
  CoordinatorOptions o = options(10);
  o.secure = true;
  o.threshold_fraction = 0.5;  // t = 6 of 10
  o.phase_timeout = 3s;
  Job job(o);
  for (uint32_t i = 0; i < 10; ++i) {
    FlClientOptions c = job.client_options(i);
    if (i >= 7) c.stop_after = SecAggPhase::kShares;  // 30% die once their shares are out
    job.start(c, constant_delta(i));
  }
  job.ready();
  RoundRecord rec = job.coord->run_round(0);
  EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(rec.dropped.size(), 3u);
  EXPECT_LT(rec.train_loss, 0);  // the server never sees a single client's numbers
  // sum_{i<7} 10 (i+1) (i+1) / sum_{i<7} 10 (i+1) = 140 / 28 = 5
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 5.f, 1e-5);
}

TEST(FlRound, SecureAggregationBelowItsThresholdDoesNotCount) {
  CoordinatorOptions o = options(4);
  o.secure = true;
  o.threshold_fraction = 0.75;  // t = 4 of 4
  o.phase_timeout = 1s;
  o.max_retries = 0;
  o.min_clients = 3;
  Job job(o);
  for (uint32_t i = 0; i < 4; ++i) {
    FlClientOptions c = job.client_options(i);
    if (i == 3) c.stop_after = SecAggPhase::kAdvertise;
    job.start(c, constant_delta(i));
  }
  job.ready();
  EXPECT_THROW(job.coord->run_round(0), Timeout);
  for (float v : job.coord->global()) EXPECT_EQ(v, 1.f);  // untouched
}

TEST(FlRound, DifferentialPrivacyClipsEachUpdateAndCountsEpsilon) {
  CoordinatorOptions o = options(4);
  o.fraction = 0.75;  // 3 of 4: q = 0.75
  o.dp.clip = 1.0;
  o.dp.noise_multiplier = 0;  // no noise: the clipped mean is exact
  Job job(o);
  for (uint32_t i = 0; i < 4; ++i) job.start(job.client_options(i), constant_delta(i));
  job.ready();
  RoundRecord rec = job.coord->run_round(0);
  ASSERT_EQ(rec.participants.size(), 3u);
  // Every delta (i+1) * ones(10) clips to ones(10) / sqrt(10); uniform weights.
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 1.f / std::sqrt(10.f), 1e-6);
  EXPECT_TRUE(std::isinf(rec.epsilon));  // z = 0: no privacy
}

TEST(FlRound, DifferentialPrivacyNoiseAndTheAccountantsEpsilon) {
  CoordinatorOptions o = options(4);
  o.fraction = 0.5;
  o.dp.clip = 0.1;
  o.dp.noise_multiplier = 1.1;
  o.dp.delta = 1e-5;
  Job job(o);
  for (uint32_t i = 0; i < 4; ++i) job.start(job.client_options(i), constant_delta(i));
  job.ready();
  RoundRecord r0 = job.coord->run_round(0);
  RoundRecord r1 = job.coord->run_round(1);
  RdpAccountant expected;
  expected.add_steps(0.5, 1.1, 2);
  EXPECT_DOUBLE_EQ(r1.epsilon, expected.epsilon(1e-5).epsilon);
  EXPECT_GT(r1.epsilon, r0.epsilon);
  // Noise of std z S / m = 0.055 per coordinate moved the parameters apart.
  const auto& w = job.coord->global();
  EXPECT_NE(w[0], w[1]);
}

TEST(FlRound, ASecureRoundLeavesOutAClientThatStaysConnectedButNeverAnswers) {
  CoordinatorOptions o = options(5);
  o.secure = true;
  o.threshold_fraction = 0.5;  // t = 3 of 5
  o.round_timeout = 2s;
  o.phase_timeout = 2s;
  Job job(o);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (uint32_t i = 0; i < 4; ++i) job.start(job.client_options(i), constant_delta(i));
  job.start(job.client_options(4), [released](const Task& t) {  // trains past the deadline
    released.wait_for(20s);
    return constant_delta(4)(t);
  });
  job.ready();
  RoundRecord rec = job.coord->run_round(0);
  release.set_value();
  EXPECT_EQ(rec.participants, (std::vector<uint32_t>{0, 1, 2, 3}));
  ASSERT_EQ(rec.dropped.size(), 1u);
  EXPECT_NE(rec.dropped[0].why.find("deadline"), std::string::npos) << rec.dropped[0].why;
  // (10 + 40 + 90 + 160) / (10 + 20 + 30 + 40) = 3
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 3.f, 1e-5);
}

// docs/federated.md's example: a strategy a program registers, selected by name.
struct HalfStep : AggregationStrategy {
  std::string name() const override { return "halfstep"; }
  void apply(std::span<float> w, const RoundAggregate& r) override {
    for (size_t i = 0; i < w.size(); ++i) w[i] += 0.5f * r.mean_delta[i];
  }
};

TEST(FlRound, AProgramCanRegisterItsOwnStrategy) {
  register_strategy("halfstep", [](const auto&) { return std::make_unique<HalfStep>(); });
  Job job(options(2), "halfstep");
  for (uint32_t i = 0; i < 2; ++i) job.start(job.client_options(i), constant_delta(i));
  job.ready();
  job.coord->run_round(0);
  for (float v : job.coord->global()) EXPECT_NEAR(v, 1.f + 0.5f * 50.f / 30.f, 1e-6);
  EXPECT_THROW(strategy_registry().make("no-such", {}), InvalidArgument);
}

}  // namespace
}  // namespace cohort::federated
