// `cohort train --set parallel.strategy=gossip --set gossip.compression=M` end to end, with
// real processes: compressed gossip (CHOCO-Gossip, parallel/decentralized/choco_gossip.h) learns
// with fp16 and top-k 10%, its workers come to agree, it reports what it sends, a run killed and
// resumed ends bit-identical on every rank, and a bad value is an error naming its key.
#include <gtest/gtest.h>

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

// The shared job with a smaller MLP (784-64-10): the codecs' time grows with the parameters,
// and the tests need only a model that learns.
std::string job(const fs::path& dir, const std::string& name) {
  return cohort::testing::gossip_job(dir, name) + " --set model.hidden=64";
}

// Trains on a ring of 4 and returns the summary; the workers must agree more at the end.
nlohmann::json train_ring_of_four(const std::string& name, const std::string& settings,
                                  double shrink) {
  fs::path d = cohort::testing::fresh_dir("cohort_choco_e2e_", name);
  CliResult r = run_cli(job(d, name) + " --workers 4 --set gossip.consensus_every=8" +
                        " --set optim.schedule=cosine " + settings);
  EXPECT_EQ(r.status, 0) << r.output;
  const std::vector<double> c = consensus(d / name / "metrics.jsonl");
  EXPECT_GE(c.size(), 3u) << name;
  if (c.size() >= 3) {
    EXPECT_GT(c.front(), 0.0) << name;
    EXPECT_LT(c.back(), shrink * c.front()) << name << ": the workers do not come to agree";
  }
  return cohort::testing::last_record(d / name / "metrics.jsonl", "summary");
}

// What the transport moved per step against the float32 parameters to every neighbour: the
// messages, plus the consensus measurements' allreduces every 8 steps.
double wire_share(const nlohmann::json& s) {
  return s.value("bytes_sent", 0.0) / s.value("steps", 1.0) / s.value("compress_raw_bytes", 1.0);
}

TEST(CompressedGossipTrain, Fp16OnARingOfFourLearnsAndItsWorkersAgree) {
  const nlohmann::json s = train_ring_of_four(
      "fp16", "--set gossip.compression=fp16 --set gossip.consensus_step=1", 0.01);
  EXPECT_GT(s.value("eval_accuracy", 0.0), 0.9) << s.dump();
  EXPECT_EQ(s.value("compression", ""), "fp16");
  EXPECT_DOUBLE_EQ(s.value("compress_ratio", 0.0), 2.0) << s.dump();
  // Two neighbours, 2 bytes per parameter each.
  EXPECT_EQ(s.value("compress_message_bytes", 0.0), s.value("compress_raw_bytes", 0.0) / 2);
  EXPECT_LT(wire_share(s), 0.75) << s.dump();  // measured 0.59
}

TEST(CompressedGossipTrain, TopKTenPercentLearns) {
  const nlohmann::json s =
      train_ring_of_four("topk", "--set gossip.compression=topk --set gossip.topk_ratio=0.1", 0.05);
  EXPECT_GT(s.value("eval_accuracy", 0.0), 0.9) << s.dump();
  // 10% of the values, each as a 4-byte index and a 4-byte value: 5x fewer bytes.
  EXPECT_NEAR(s.value("compress_ratio", 0.0), 5.0, 0.01) << s.dump();
  EXPECT_LT(wire_share(s), 0.4) << s.dump();                     // measured 0.29
  EXPECT_DOUBLE_EQ(s.value("gossip_consensus_step", 0.0), 0.2);  // by codec: 2 * ratio
}

// The public copies (own and neighbours') are per-rank state beside the parameters, and the
// step count (QSGD's rounding draws) rides in state.json: resume is bit-identical.
TEST(CompressedGossipTrain, ResumeIsExactOnEveryRank) {
  fs::path d = cohort::testing::fresh_dir("cohort_choco_e2e_", "resume");
  const std::string ckpt =
      " --workers 2 --set optim.momentum=0.9 --set ckpt.enabled=true --set ckpt.every_steps=8"
      " --set ckpt.async=false --set gossip.compression=qsgd";
  auto job_of = [&](const std::string& name) { return job(d, name); };
  const fs::path a =
      cohort::testing::expect_killed_run_resumes_exactly(job_of, d, ckpt, 44, 40).first;
  const std::string rank1 = cohort::testing::read_bytes(a / "strategy.rank1.safetensors");
  EXPECT_NE(rank1.find("choco/peer0"), std::string::npos) << "no public copy of rank 0 saved";
}

TEST(CompressedGossipTrain, ABadValueIsAnErrorNamingItsKey) {
  fs::path d = cohort::testing::fresh_dir("cohort_choco_e2e_", "bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gossip.compression=zip", "gossip.compression"},
      {"gossip.compression=fp16 --set gossip.consensus_step=1.5", "gossip.consensus_step' = 1.5"},
      {"gossip.compression=topk --set gossip.topk_ratio=0", "gossip.topk_ratio = 0"}};
  for (const auto& [setting, expected] : cases) {
    CliResult r = run_cli(job(d, "bad") + " --workers 2 --set " + setting);
    EXPECT_NE(r.status, 0) << setting;
    EXPECT_TRUE(contains(r, expected)) << setting << ":\n" << r.output;
  }
}

}  // namespace
