// data.dataset = "csv" and "numpy" through `cohort train` (docs/data.md): a model sized from the
// files (features, classes, image shape) trains with 2 workers, and a file that does not fit is
// an error naming the file and the line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/run_cli.h"
#include "tests/support/files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_cli;

// A 3-class problem in 6 features: class c has feature c far above the others, plus noise.
// `header`: a first row of names.
void write_csv(const fs::path& path, int rows, bool header, int seed) {
  std::ofstream f(path);
  if (header) f << "a,b,c,d,e,f,label\n";
  uint32_t state = uint32_t(seed) * 2654435761u + 1;
  auto noise = [&] {
    state = state * 1664525u + 1013904223u;
    return double(state >> 8) / double(1u << 24) - 0.5;
  };
  for (int i = 0; i < rows; ++i) {
    const int label = i % 3;
    for (int j = 0; j < 6; ++j) f << (j == label ? 2.0 : 0.0) + noise() << ",";
    f << label << "\n";
  }
}

class FileDataTrain : public ::testing::Test {
 protected:
  std::string train(const std::string& sets) {
    return "train " COHORT_SOURCE_DIR
           "/examples/fashion_mlp.toml --set model.type=mlp --set model.hidden=[16] --set "
           "run.progress=none "
           "--set optim.lr=0.1 --set train.epochs=3 --set run.dir=" +
           (dir_ / "runs").string() + " " + sets;
  }
  testing::TempDir tmp_;
  const fs::path dir_{tmp_.path()};
};

double final_accuracy(const std::string& out) {
  const size_t at = out.rfind("accuracy ");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 9);
}

TEST_F(FileDataTrain, ACsvTrainsWithTwoWorkersAndTheModelSizedFromIt) {
  write_csv(dir_ / "train.csv", 600, true, 1);
  write_csv(dir_ / "test.csv", 300, true, 2);
  auto r = run_cli(train(
      "--workers 2 --set data.dataset=csv --set data.path=" + (dir_ / "train.csv").string() +
      " --set data.eval_path=" + (dir_ / "test.csv").string() + " --set data.label_column=label"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "mlp, 163 parameters")) << r.output;  // 6*16+16 + 16*3+3
  EXPECT_GT(final_accuracy(r.output), 90.0) << r.output;
}

TEST_F(FileDataTrain, WithoutATestFileTheLastRowsAreHeldOut) {
  write_csv(dir_ / "train.csv", 600, false, 1);
  auto r =
      run_cli(train("--set data.dataset=csv --set data.path=" + (dir_ / "train.csv").string()));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "eval (validation)")) << r.output;
}

TEST_F(FileDataTrain, ARaggedRowIsAnErrorNamingTheFileAndLine) {
  write_csv(dir_ / "train.csv", 50, true, 1);
  std::ofstream(dir_ / "train.csv", std::ios::app) << "1,2,3\n";
  const std::string path = (dir_ / "train.csv").string();
  auto r = run_cli(train("--set data.dataset=csv --set data.path=" + path));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, path + ":52: expected 7 fields (as in line 1), got 3")) << r.output;
}

TEST_F(FileDataTrain, MissingPathAndTheCnnOnFlatRowsSayWhatToSet) {
  auto r = run_cli(train("--set data.dataset=numpy"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "data.dataset = \"numpy\" needs data.path")) << r.output;
  write_csv(dir_ / "train.csv", 200, true, 1);
  r = run_cli(train("--set model.type=cnn --set data.dataset=csv --set data.path=" +
                    (dir_ / "train.csv").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "model.type = \"cnn\" needs images")) << r.output;
  EXPECT_TRUE(contains(r, "data.shape = [channels, height, width]")) << r.output;
  r = run_cli(train("--set data.shape=[2,2] --set data.dataset=csv --set data.path=" +
                    (dir_ / "train.csv").string()));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "data.shape [2, 2] has 4 values per sample")) << r.output;
}

}  // namespace
}  // namespace cohort
