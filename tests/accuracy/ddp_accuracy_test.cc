// `cohort train examples/fashion_mlp.toml --workers 2` reaches the 1-worker accuracy after one
// epoch (the data-parallel issue's promise: within 0.5 percentage points), on the real
// Fashion-MNIST. Two workers see the same samples per epoch in half the steps (global batch
// 128, same learning rate), so single seeds differ by up to a point either way; the claim is
// about the mean over seeds, as for the 1-worker accuracy test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"

namespace {

namespace fs = std::filesystem;

double final_accuracy(int workers, int seed) {
  fs::path dir = fs::temp_directory_path() / "cohort_ddp_accuracy";
  std::string name = "w" + std::to_string(workers) + "s" + std::to_string(seed);
  fs::remove_all(dir / name);
  auto r = cohort::testing::run_cli(
      "train " + std::string(COHORT_SOURCE_DIR) + "/examples/fashion_mlp.toml --workers " +
      std::to_string(workers) + " --set run.seed=" + std::to_string(seed) +
      " --set run.progress=none --set ckpt.enabled=false --set run.dir=" + dir.string() +
      " --set run.name=" + name);
  EXPECT_EQ(r.status, 0) << r.output;
  std::ifstream in(dir / name / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return last.empty() ? 0 : nlohmann::json::parse(last).value("eval_accuracy", 0.0);
}

TEST(DdpAccuracy, TwoWorkersMatchOneWorkerAfterOneEpoch) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  constexpr int kSeeds = 4;
  double one = 0, two = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    one += final_accuracy(1, seed) / kSeeds;
    two += final_accuracy(2, seed) / kSeeds;
  }
  EXPECT_NEAR(two, one, 0.005) << "mean accuracy over seeds 0-" << kSeeds - 1;
  EXPECT_GE(two, 0.835);
}

}  // namespace
