// The accuracy the foundation issue promises, on the real Fashion-MNIST, through the same
// Trainer `cohort train` runs. One epoch, batch 64, SGD momentum 0.9 (examples/*.toml).
// Reference: PyTorch 1.13 with the same settings reaches 85.0% (MLP) and 85.9% (CNN).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "cohort/train/config/train_config.h"
#include "cohort/train/trainer.h"

namespace cohort::train {
namespace {

bool have_fashion() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
}

double accuracy(const std::string& example, int seed) {
  Config cfg = load_config(
      std::string(COHORT_SOURCE_DIR) + "/examples/" + example,
      {"run.seed=" + std::to_string(seed), "run.progress=none",
       "run.dir=" + (std::filesystem::temp_directory_path() / "cohort_accuracy").string()});
  Trainer t(cfg);
  return t.run().eval.accuracy;
}

// The last-iterate accuracy after one epoch varies by about +-0.8% with the seed (shuffling
// and initialisation), for PyTorch as for cohort (bench/torch_fashion_accuracy.py: PyTorch
// 1.13 gives 84.0-85.8% over seeds 0-9 with this recipe). The claim is the mean over seeds.
TEST(Accuracy, MlpOneEpochMeanOfFiveSeeds) {
  if (!have_fashion()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  std::vector<double> acc;
  for (int seed = 0; seed < 5; ++seed) acc.push_back(accuracy("fashion_mlp.toml", seed));
  double mean = std::accumulate(acc.begin(), acc.end(), 0.0) / double(acc.size());
  EXPECT_GE(mean, 0.845) << "mean of seeds 0-4";
  EXPECT_GE(*std::min_element(acc.begin(), acc.end()), 0.82);
}

TEST(Accuracy, CnnOneEpoch) {
  if (!have_fashion()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  EXPECT_GE(accuracy("fashion_cnn.toml", 0), 0.855);
}

}  // namespace
}  // namespace cohort::train
