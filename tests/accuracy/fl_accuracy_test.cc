// Federated averaging on IID data reaches centralized training's accuracy after the same number
// of samples (issue 17: FedAvg, 10 clients, C = 0.5, E = 1, the MLP, within 1 point), on the real
// Fashion-MNIST. Ten rounds of 5 clients x 6000 samples are 300 000 samples, five epochs of
// `cohort train`. FedAvg's gap is largest early on (about 1 point after one epoch's worth) and
// closes as both converge; the claim is about the mean over seeds.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"

namespace {

namespace fs = std::filesystem;

fs::path run_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("cohort_fl_accuracy_" + std::to_string(getpid()));
  fs::remove_all(dir / name);
  return dir;
}

// The last record of `event` in a run's metrics.jsonl, and its `key`.
double last_value(const fs::path& run, const std::string& event, const std::string& key) {
  std::ifstream in(run / "metrics.jsonl");
  double v = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == event && j.contains(key)) v = j[key].get<double>();
  }
  return v;
}

double federated(int seed) {
  const std::string name = "fl" + std::to_string(seed);
  const fs::path dir = run_dir(name);
  auto r = cohort::testing::run_cli(
      "fl run " + std::string(COHORT_SOURCE_DIR) +
      "/examples/fashion_mlp_fl.toml --clients 10 --set fl.rounds=10 --set run.seed=" +
      std::to_string(seed) + " --set ckpt.enabled=false --set run.dir=" + dir.string() +
      " --set run.name=" + name);
  EXPECT_EQ(r.status, 0) << r.output;
  return last_value(dir / name, "fl_round", "test_accuracy");
}

double centralized(int seed) {
  const std::string name = "c" + std::to_string(seed);
  const fs::path dir = run_dir(name);
  auto r = cohort::testing::run_cli(
      "train " + std::string(COHORT_SOURCE_DIR) +
      "/examples/fashion_mlp.toml --set train.epochs=5 --set run.seed=" + std::to_string(seed) +
      " --set run.progress=none --set ckpt.enabled=false --set run.dir=" + dir.string() +
      " --set run.name=" + name);
  EXPECT_EQ(r.status, 0) << r.output;
  return last_value(dir / name, "eval", "accuracy");
}

TEST(FlAccuracy, FedAvgOnIidDataMatchesCentralizedTrainingAfterTheSameSamples) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  constexpr int kSeeds = 2;
  double fl = 0, central = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    fl += federated(seed) / kSeeds;
    central += centralized(seed) / kSeeds;
  }
  std::printf("mean test accuracy: FedAvg %.2f%%, centralized %.2f%%\n", 100 * fl, 100 * central);
  EXPECT_NEAR(fl, central, 0.01) << "mean test accuracy over seeds 1-" << kSeeds;
  EXPECT_GE(fl, 0.86);
}

}  // namespace
