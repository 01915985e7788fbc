// `cohort train --workers N --set parallel.strategy=gossip` end to end, with real processes:
// decentralized SGD learns, reports its consensus distance (which shrinks as the learning rate
// decays), and a dead worker ends the job within the deadline, named.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/gossip_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::run_cli;

namespace {

using cohort::testing::consensus;
using cohort::testing::contains;

std::string job(const fs::path& dir, const std::string& name) {
  return cohort::testing::gossip_job(dir, name);
}

TEST(GossipTrain, ARingOfFourLearnsAndItsConsensusDistanceShrinks) {
  fs::path d = cohort::testing::fresh_dir("cohort_gossip_e2e_", "ring");
  for (const std::string topology : {"ring", "exponential", "torus"}) {
    CliResult r = run_cli(job(d, topology) + " --workers 4 --set gossip.topology=" + topology +
                          " --set gossip.consensus_every=8 --set optim.schedule=cosine");
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json s =
        cohort::testing::last_record(d / topology / "metrics.jsonl", "summary");
    EXPECT_GT(s["eval_accuracy"].get<double>(), 0.5) << topology << ": " << s.dump();
    const std::vector<double> c = consensus(d / topology / "metrics.jsonl");
    ASSERT_GE(c.size(), 3u) << topology;
    EXPECT_GT(c.front(), 0.0) << topology;
    EXPECT_LT(c.back(), c.front()) << topology << ": the workers do not agree more at the end";
  }
}

// Each worker's own parameters and momentum are per-rank checkpoint state: a run killed after
// step 40 and resumed ends bit-identical to an uninterrupted one, on every rank.
TEST(GossipTrain, ResumeIsExactOnEveryRank) {
  fs::path d = cohort::testing::fresh_dir("cohort_gossip_e2e_", "resume");
  const std::string ckpt =
      " --workers 2 --set optim.momentum=0.9 --set ckpt.enabled=true"
      " --set ckpt.every_steps=8 --set ckpt.async=false";
  auto job_of = [&](const std::string& name) { return job(d, name); };
  cohort::testing::expect_killed_run_resumes_exactly(job_of, d, ckpt, 40, 40);
  // Another number of workers cannot take the per-rank state.
  CliResult three = run_cli(job(d, "crash") + " --workers 3 --set ckpt.enabled=true --resume auto");
  EXPECT_NE(three.status, 0) << three.output;
  EXPECT_TRUE(contains(three, "per-rank state of strategy 'gossip' for 2 rank(s), this run has 3"))
      << three.output;
}

TEST(GossipTrain, ADeadWorkerEndsTheJobWithinTheDeadlineNamed) {
  fs::path d = cohort::testing::fresh_dir("cohort_gossip_e2e_", "dead");
  const auto t0 = std::chrono::steady_clock::now();
  CliResult r = run_cli(job(d, "x") +
                        " --workers 4 --set fault.kill_rank=2"
                        " --set fault.kill_at_step=5");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "rank 2 was killed by signal 9")) << r.output;
  EXPECT_LT(secs, 30.0);
}

}  // namespace
