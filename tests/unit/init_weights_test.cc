// model.init_from (cohort/train/init_weights.h): a model's starting weights from a
// safetensors file, with renames and skips, and the errors a wrong file gets.
#include "cohort/train/init_weights.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "cohort/ckpt/safetensors.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/train/config/train_config.h"
#include "tests/support/files.h"
#include "tests/unit/data_test_util.h"

namespace cohort::train {
namespace {

namespace fs = std::filesystem;
using data::expect_error;

class InitWeights : public ::testing::Test {
 protected:
  // Writes `tensors` as a safetensors file and returns a config whose model.init_* keys say it.
  Config config(const NamedTensors& tensors, const std::string& map = "",
                const std::string& skip = "") {
    const std::string path = (dir_ / "weights.safetensors").string();
    ckpt::write_safetensors(path, tensors);
    Config cfg(train_registry());
    cfg.set("model.init_from", path, "test");
    cfg.set("model.init_map", map, "test");
    cfg.set("model.init_skip", skip, "test");
    return cfg;
  }
  // A donor model's parameters, as a file of PyTorch's names would hold them.
  static NamedTensors donor(uint64_t seed) {
    nn::MLP m({8, 6, 3}, {.seed = seed});
    NamedTensors out;
    for (auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.clone_raw());
    return out;
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

std::vector<float> values(const nn::Module& m, const std::string& name) {
  return m.state_dict().at(name).to_vector<float>();
}

TEST_F(InitWeights, EveryTensorComesFromTheFile) {
  NamedTensors file = donor(7);
  nn::MLP model({8, 6, 3}, {.seed = 1});
  InitReport r = load_initial_weights(config(file), model);
  EXPECT_EQ(r.loaded, 4);
  EXPECT_EQ(r.kept, 0);
  for (auto& [name, t] : file) EXPECT_EQ(values(model, name), t.to_vector<float>()) << name;
}

TEST_F(InitWeights, UnsetLoadsNothing) {
  nn::MLP model({8, 6, 3}, {.seed = 1});
  const auto before = values(model, "layers.0.weight");
  InitReport r = load_initial_weights(Config(train_registry()), model);
  EXPECT_TRUE(r.path.empty());
  EXPECT_EQ(values(model, "layers.0.weight"), before);
}

// A file from PyTorch's nn.Sequential ("0.weight", "2.weight"), its head left out.
TEST_F(InitWeights, RenamesAndSkipsKeepTheNewHead) {
  NamedTensors file;
  for (auto& [name, t] : donor(7)) {
    file.emplace_back((name.rfind("layers.0.", 0) == 0 ? "0." : "2.") + name.substr(9), t);
  }
  nn::MLP model({8, 6, 3}, {.seed = 1});
  const auto head = values(model, "layers.1.weight");
  InitReport r =
      load_initial_weights(config(file, "0.=layers.0., 2.=layers.1.", "layers.1."), model);
  EXPECT_EQ(r.loaded, 2);
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(values(model, "layers.0.weight"), file[0].second.to_vector<float>());
  EXPECT_EQ(values(model, "layers.1.weight"), head) << "a skipped tensor must keep its init";
}

TEST_F(InitWeights, HalfPrecisionFilesConvert) {
  NamedTensors file = donor(7);
  for (auto& [name, t] : file) {
    Tensor h = empty(t.shape(), DType::f16);
    h.copy_(t);
    t = h;
  }
  nn::MLP model({8, 6, 3}, {.seed = 1});
  load_initial_weights(config(file), model);
  const auto got = values(model, "layers.0.bias");
  const auto want = donor(7)[1].second.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << i;
}

TEST_F(InitWeights, MissingAndUnexpectedTensorsAreNamedAndNothingIsLoaded) {
  NamedTensors file = donor(7);
  file.erase(file.begin() + 1);  // layers.0.bias
  file.emplace_back("classifier.weight", zeros({3, 6}));
  nn::MLP model({8, 6, 3}, {.seed = 1});
  const auto before = values(model, "layers.0.weight");
  Config cfg = config(file);
  expect_error<InvalidArgument>(
      [&] { load_initial_weights(cfg, model); },
      {"model.init_from", "weights.safetensors", "not in the file: layers.0.bias",
       "not in the model: classifier.weight", "model.init_map", "model.init_skip"});
  EXPECT_EQ(values(model, "layers.0.weight"), before);
}

TEST_F(InitWeights, AShapeMismatchNamesTheTensorAndBothShapes) {
  NamedTensors file = donor(7);
  file[0].second = zeros({5, 8});  // layers.0.weight is [6, 8]
  nn::MLP model({8, 6, 3}, {.seed = 1});
  Config cfg = config(file);
  expect_error<InvalidArgument>([&] { load_initial_weights(cfg, model); },
                                {"model.init_from", "layers.0.weight", "[6, 8]", "[5, 8]"});
}

TEST_F(InitWeights, BadInputsGetErrorsNamingWhatIsWrong) {
  nn::MLP model({8, 6, 3}, {.seed = 1});
  Config map = config(donor(7), "layers.0.");
  expect_error<InvalidArgument>([&] { load_initial_weights(map, model); },
                                {"model.init_map", "'layers.0.'", "FROM=TO"});
  NamedTensors ints = donor(7);
  ints[1].second = zeros({6}, DType::i64);
  Config int_file = config(ints);
  expect_error<InvalidArgument>([&] { load_initial_weights(int_file, model); },
                                {"layers.0.bias", "int64", "float32"});
  Config absent(train_registry());
  absent.set("model.init_from", (dir_ / "nope.safetensors").string(), "test");
  expect_error<IoError>([&] { load_initial_weights(absent, model); }, {"nope.safetensors"});
}

}  // namespace
}  // namespace cohort::train
