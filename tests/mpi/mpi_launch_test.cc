// Outside mpirun, re-runs this binary under `mpirun -n 3` (the MpiBackend.* tests skip
// themselves without it), and the process-group tests under `mpirun -n 2` (and -n 4), and checks
// that every rank passed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "mpi_test_util.h"

namespace cohort::comm::mpi_test {
namespace {

std::string find_mpirun() {
#ifdef COHORT_MPIRUN
  if (std::filesystem::exists(COHORT_MPIRUN)) return COHORT_MPIRUN;
#endif
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/lib64/openmpi/bin"}) {
    std::string p = std::string(dir) + "/mpirun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Runs this binary's tests matching `filter` under `mpirun -n ranks`; every rank must run them
// (not skip) and pass.
void expect_every_rank_passes(int ranks, const std::string& filter) {
  if (under_mpirun()) GTEST_SKIP() << "already under mpirun";
  std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not found (install openmpi-bin); MPI tests skipped";
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  // `timeout` bounds a hung job; --oversubscribe lets 3 ranks share 2 cores.
  std::string cmd = "timeout -k 5 120 " + mpirun + " --allow-run-as-root --oversubscribe -n " +
                    std::to_string(ranks) + " " + self + " --gtest_color=no --gtest_filter='" +
                    filter + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << "popen failed: " << cmd;
  std::string output;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << cmd << "\n" << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << cmd << "\n" << output;
  // Each rank reports its own run: all must have run (not skipped) and passed.
  int passed = 0;
  for (size_t at = 0; (at = output.find("[  PASSED  ]", at)) != std::string::npos; ++at) ++passed;
  EXPECT_EQ(passed, ranks) << output;
  EXPECT_EQ(output.find("[  FAILED  ]"), std::string::npos) << output;
  EXPECT_EQ(output.find("[  SKIPPED ]"), std::string::npos) << output;
}

TEST(MpiLaunch, EveryCollectivePassesUnderMpirunWith3Ranks) {
  expect_every_rank_passes(3, "MpiBackend*");
}

// 3 ranks run the process-group tests above (they are MpiBackend.*); 2 ranks here.
TEST(MpiLaunch, ProcessGroupMatchesNativeUnderMpirunWith2Ranks) {
  expect_every_rank_passes(2, "MpiBackend.ProcessGroup*");
}

// The widened ProcessGroup (mpi_process_group_ops_test.cc) also under 4 ranks.
TEST(MpiLaunch, ProcessGroupOpsUnderMpirunWith4Ranks) {
  expect_every_rank_passes(4, "MpiBackend.ProcessGroupOps*");
}

}  // namespace
}  // namespace cohort::comm::mpi_test
