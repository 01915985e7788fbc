// Scaling efficiency on real runs, as the issue met it: a 1-worker run with 2 threads (the
// default on a 2-core machine) and a 2-worker run with 1 thread each. The 1-worker run is the
// baseline of `cohort train`'s summary and of `cohort report`, and both say that the threads
// per worker differ, with the per-core efficiency beside.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::last_record;
using cohort::testing::run_cli;
using json = nlohmann::json;

// 2048 synthetic samples, batch 64 per worker: 32 steps with 1 worker, 16 with 2 (the trainer
// records and compares runs of at least 20 steps: 2 epochs).
CliResult train(const fs::path& root, const std::string& name, int workers, int threads) {
  return run_cli(
      "train /dev/null" + (workers > 1 ? " --workers " + std::to_string(workers) : std::string()) +
      " --set data.dataset=synthetic --set data.synthetic_samples=2048"
      " --set train.epochs=2 --set run.progress=none --set comm.timeout_s=30"
      " --set run.threads=" +
      std::to_string(threads) + " --set run.dir=" + root.string() + " --set run.name=" + name);
}

TEST(ScalingE2E, AOneWorkerRunWithOtherThreadsIsTheBaselineAndSaidSo) {
  fs::path root = cohort::testing::fresh_dir("cohort_scaling_e2e_", "unlike");
  CliResult one = train(root, "w1", 1, 2);
  ASSERT_EQ(one.status, 0) << one.output;
  CliResult two = train(root, "w2", 2, 1);
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_TRUE(contains(two, "scaling efficiency vs 1 worker: ")) << two.output;
  EXPECT_TRUE(contains(two, "the 1-worker run had 2 threads, these workers 1 each")) << two.output;
  json sum = last_record(root / "w2" / "metrics.jsonl", "summary");
  double sps1 = last_record(root / "w1" / "metrics.jsonl", "summary")["samples_per_s"];
  double sps2 = sum["samples_per_s"];
  EXPECT_DOUBLE_EQ(sum["scaling_efficiency"].get<double>(), sps2 / (2 * sps1));
  EXPECT_EQ(sum["scaling_baseline_threads"], 2);
  EXPECT_DOUBLE_EQ(sum["scaling_efficiency_per_core"].get<double>(), (sps2 / 2) / (sps1 / 2));

  CliResult rep = run_cli("report " + (root / "w1").string() + " " + (root / "w2").string() +
                          " -o " + (root / "report.html").string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  EXPECT_TRUE(contains(rep,
                       "cohort report: warning: scaling: run 'w2' (2 workers x 1 thread = "
                       "2 cores) is compared with the 1-worker run 'w1' (1 worker x 2 "
                       "threads = 2 cores): threads per worker differ"))
      << rep.output;
}

TEST(ScalingE2E, TheSameThreadsGiveThePlainEfficiencyWithoutANote) {
  fs::path root = cohort::testing::fresh_dir("cohort_scaling_e2e_", "like");
  ASSERT_EQ(train(root, "w1", 1, 1).status, 0);
  CliResult two = train(root, "w2", 2, 1);
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_TRUE(contains(two, "scaling efficiency vs 1 worker: ")) << two.output;
  EXPECT_FALSE(contains(two, "per core")) << two.output;
  json sum = last_record(root / "w2" / "metrics.jsonl", "summary");
  EXPECT_TRUE(sum.contains("scaling_efficiency"));
  EXPECT_FALSE(sum.contains("scaling_baseline_threads"));
  CliResult rep = run_cli("report " + (root / "w1").string() + " " + (root / "w2").string() +
                          " -o " + (root / "report.html").string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  EXPECT_FALSE(contains(rep, "warning")) << rep.output;
}

}  // namespace
