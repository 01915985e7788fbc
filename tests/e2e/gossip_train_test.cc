// `cohort train --workers N --set parallel.strategy=gossip` end to end, with real processes:
// decentralized SGD learns, reports its consensus distance (which shrinks as the learning rate
// decays), and a dead worker ends the job within the deadline, named.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::run_cli;

namespace {

std::string job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=4096"
         " --set data.batch_size=32 --set train.epochs=2 --set run.threads=1"
         " --set run.log_every=4 --set run.progress=none --set comm.timeout_s=30"
         " --set ckpt.enabled=false --set parallel.strategy=gossip --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

bool contains(const CliResult& r, const std::string& s) {
  return r.output.find(s) != std::string::npos;
}

// consensus_distance of every step record that has one, in order.
std::vector<double> consensus(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("event", "") == "step" && j.contains("consensus_distance"))
      out.push_back(j["consensus_distance"].get<double>());
  }
  return out;
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
