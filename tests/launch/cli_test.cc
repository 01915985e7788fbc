// `cohort run` through the real CLI binary (COHORT_BIN), as a user would type it.
#include <gtest/gtest.h>

#include "tests/e2e/run_cli.h"

namespace cohort::launch {
namespace {

using cohort::testing::run_cli;

TEST(RunCli, TwoWorkersPrintTaggedLines) {
  auto r = run_cli("run -n 2 -- sh -c 'echo hi $COHORT_RANK'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cohort run: 2 workers, store 127.0.0.1:"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 0] hi 0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 1] hi 1\n"), std::string::npos) << r.output;
}

TEST(RunCli, OptionsAfterTheProgramBelongToTheProgram) {
  auto r = run_cli("run -n 1 --no-tag sh -c 'echo got $0' -n");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\ngot -n\n"), std::string::npos) << r.output;
}

TEST(RunCli, AFailedWorkerSetsTheExitStatusAndIsNamed) {
  auto r = run_cli(
      "run -n 2 -- sh -c '[ $COHORT_RANK = 1 ] && { echo bad input >&2; exit 4; }; "
      "exit 0'");
  EXPECT_EQ(r.status, 4) << r.output;
  EXPECT_NE(r.output.find("cohort run: rank 1 exited with exit code 4"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  bad input"), std::string::npos) << r.output;
}

TEST(RunCli, BadOptionsGiveAClearError) {
  auto r = run_cli("run -n 0 -- true");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-n (workers per node) must be >= 1, got 0"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cohort::launch
