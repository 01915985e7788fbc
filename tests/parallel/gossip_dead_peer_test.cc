// Gossip (parallel/decentralized/gossip_strategy.h) with a worker killed mid-run, ranks as real
// processes (SIGKILL: no destructor, no orderly close): its neighbours' exchange fails with an
// error naming its rank, and every survivor stops with an error within the deadline instead of
// hanging. Children report through their exit status (gtest runs in the parent).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>

#include "cohort/core/config.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/optim/sgd.h"
#include "cohort/parallel/strategy_registry.h"
#include "tests/comm/fork_ranks.h"
#include "tests/comm/process_job.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using comm::testing::Job;
using std::chrono::milliseconds;

enum Exit { kOk = 0, kWrongError = 1, kThrew = 2, kNoError = 3, kChildTimeout = 99 };
constexpr int kWorld = 4, kVictim = 2, kKillAtStep = 3;
constexpr milliseconds kTimeout{3000};

// Trains on a ring of kWorld; the victim kills itself before step kKillAtStep. A survivor
// must fail within the timeout (plus slack): its neighbours naming the victim, the rank
// opposite naming a neighbour that gave up.
int gossip_child(const Job& job, int rank) {
  set_num_threads(1);
  auto c = comm::Communicator::create(comm::testing::connect_store(job), rank, job.size,
                                      comm::testing::job_options(job, kTimeout));
  ConfigRegistry registry;
  add_strategy_keys(registry);
  Config cfg(registry);
  nn::MLP model({12, 16, 5}, {.seed = 7});
  optim::SGD opt(model.named_parameters(), {.lr = 0.1});
  auto strategy = make_strategy("gossip", {model, opt, comm::make_process_group(c), cfg});
  for (int step = 0; step < 50; ++step) {
    if (rank == kVictim && step == kKillAtStep) ::raise(SIGKILL);
    auto [x, y] = testing::make_batch(6, 12, 5, 300 + uint64_t(step));
    auto start = std::chrono::steady_clock::now();
    try {
      opt.zero_grad();
      strategy->backward(nn::cross_entropy(strategy->forward(x), y), true);
      strategy->step();
    } catch (const std::exception& e) {
      auto took = std::chrono::steady_clock::now() - start;
      std::string msg = e.what();
      bool neighbour = rank == kVictim - 1 || rank == kVictim + 1;
      bool named = msg.find("rank " + std::to_string(kVictim)) != std::string::npos;
      bool ok = (named || !neighbour) && took < kTimeout + milliseconds(2000);
      std::fprintf(stderr, "rank %d after %lld ms: %s\n", rank,
                   (long long)std::chrono::duration_cast<milliseconds>(took).count(), e.what());
      return ok ? kOk : kWrongError;
    }
  }
  return kNoError;
}

TEST(GossipDeadPeer, NeighboursNameTheDeadRankAndNobodyHangs) {
  net::Secret secret = net::Secret::generate();
  comm::testing::StoreProcess store(secret);
  ASSERT_NE(store.port(), 0);
  Job job{kWorld, comm::transport::TransportKind::kShm, secret, store.port()};
  auto codes = comm::testing::fork_ranks(
      kWorld, [&](int r) { return gossip_child(job, r); }, kThrew, kChildTimeout);
  for (int r = 0; r < kWorld; ++r) {
    if (r == kVictim)
      EXPECT_EQ(codes[size_t(r)], 128 + SIGKILL);
    else
      EXPECT_EQ(codes[size_t(r)], kOk) << "rank " << r;
  }
}

}  // namespace
}  // namespace cohort::parallel
