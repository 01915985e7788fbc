// A model and a data set registered by a program of one's own (cohort/train/extensions.h,
// examples/own_model_and_data.cpp) train through the whole CLI like built-ins: with 2 workers,
// with each other and with the built-in MLP, and they appear in model.type's choices.
#include <gtest/gtest.h>

#include "tests/e2e/run_cli.h"
#include "tests/support/files.h"

namespace cohort {
namespace {

using testing::contains;

class OwnModelAndData : public ::testing::Test {
 protected:
  testing::CliResult run(const std::string& sets) {
    return testing::run_shell(std::string(OWN_MODEL_BIN) +
                              " train " COHORT_SOURCE_DIR
                              "/examples/fashion_mlp.toml --set run.progress=none --set run.dir=" +
                              tmp_.path() + " " + sets);
  }
  testing::TempDir tmp_;
};

double final_accuracy(const std::string& out) {
  const size_t at = out.rfind("test accuracy ");
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + 14);
}

TEST_F(OwnModelAndData, TheRegisteredModelLearnsTheRegisteredDataWithTwoWorkers) {
  auto r =
      run("--workers 2 --set model.type=residual_mlp --set data.dataset=spirals "
          "--set train.epochs=20");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "residual_mlp, 33730 parameters")) << r.output;
  EXPECT_GT(final_accuracy(r.output), 90.0) << r.output;  // a linear model stays near 50%
}

TEST_F(OwnModelAndData, ABuiltInModelIsSizedFromTheRegisteredData) {
  auto r = run("--set data.dataset=spirals --set model.hidden=[32] --set train.epochs=1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "mlp, 162 parameters")) << r.output;  // 2*32+32 + 32*2+2
}

TEST_F(OwnModelAndData, AnUnknownTypeListsTheRegisteredOnes) {
  auto r = run("--set model.type=resnet");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r, "resnet")) << r.output;
  EXPECT_TRUE(contains(r, "residual_mlp")) << r.output;
}

}  // namespace
}  // namespace cohort
