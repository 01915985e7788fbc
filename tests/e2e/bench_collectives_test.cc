// `cohort bench collectives` as a user runs it: a real process that forks its ranks, prints an
// nccl-tests-style table with no wrong results, and refuses bad arguments with a clear message.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "tests/e2e/run_cli.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Result = cohort::testing::CliResult;

Result run(const std::string& args) {
  return cohort::testing::run_cli(args);
}

struct Row {
  long long size = 0, count = 0, wrong = -1;
  std::string type;
  double us = 0, algbw = 0, busbw = 0;
};

// The table's data rows (lines that start with a number after the padding).
std::vector<Row> rows(const std::string& output) {
  std::vector<Row> out;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    Row r;
    if (f >> r.size >> r.count >> r.type >> r.us >> r.algbw >> r.busbw >> r.wrong) out.push_back(r);
  }
  return out;
}

TEST(BenchCollectives, AllreduceSweepOnTwoRanksHasNoWrongResults) {
  Result r = run("bench collectives -n 2 --sizes 4K:64K --iters 3 --warmup 1");
  ASSERT_EQ(r.status, 0) << r.output;
  auto table = rows(r.output);
  ASSERT_EQ(table.size(), 5u) << r.output;  // 4K, 8K, 16K, 32K, 64K
  long long size = 4096;
  for (const Row& row : table) {
    EXPECT_EQ(row.size, size) << r.output;
    EXPECT_EQ(row.count, size / 4);
    EXPECT_EQ(row.type, "f32");
    EXPECT_EQ(row.wrong, 0) << r.output;
    EXPECT_GT(row.us, 0.0);
    // Two ranks: allreduce busbw = algbw * 2(n-1)/n = algbw.
    EXPECT_NEAR(row.busbw, row.algbw, 0.002);
    size *= 2;
  }
}

TEST(BenchCollectives, OtherOpsCheckTheirResults) {
  for (const char* op : {"broadcast", "allgather", "reduce_scatter"}) {
    Result r = run(std::string("bench collectives -n 3 --transport tcp --sizes 4K:8K --iters 2 "
                               "--warmup 0 --dtype bf16 --op ") +
                   op);
    ASSERT_EQ(r.status, 0) << op << "\n" << r.output;
    auto table = rows(r.output);
    ASSERT_EQ(table.size(), 2u) << op << "\n" << r.output;
    for (const Row& row : table) {
      EXPECT_EQ(row.wrong, 0) << op << "\n" << r.output;
      EXPECT_EQ(row.type, "bf16");
    }
  }
}

TEST(BenchCollectives, AllreduceAcceptsTheHierarchicalAlgorithm) {
  // One host: the hierarchy is a reduce and a broadcast within it, still exact.
  Result r = run("bench collectives -n 3 --sizes 4K:8K --iters 2 --warmup 0 --algo hierarchical");
  ASSERT_EQ(r.status, 0) << r.output;
  auto table = rows(r.output);
  ASSERT_EQ(table.size(), 2u) << r.output;
  for (const Row& row : table) EXPECT_EQ(row.wrong, 0) << r.output;
  EXPECT_NE(r.output.find("hierarchical"), std::string::npos) << r.output;
}

TEST(BenchCollectives, BadArgumentsFailWithAClearMessage) {
  Result r = run("bench collectives -n 2 --sizes 64K:4K");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--sizes 64K:4K: MIN (65536 bytes) is larger than MAX (4096 bytes)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(rows(r.output).empty()) << r.output;

  r = run("bench collectives -n 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("-n 0 is out of range"), std::string::npos) << r.output;

  r = run("bench collectives --op allreduce --algo tree");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--algo 'tree' is not valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hierarchical"), std::string::npos) << r.output;  // listed as valid

  r = run("bench collectives --sizes 4X");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown suffix 'X'"), std::string::npos) << r.output;

  r = run("bench collectives --backend nccl");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown --backend 'nccl' (native, mpi)"), std::string::npos) << r.output;

  // MPI picks its own algorithm: refused before mpirun is started.
  r = run("bench collectives --backend mpi --algo ring");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--algo ring needs --backend native"), std::string::npos) << r.output;
}

bool mpirun_on_path() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0;
}

TEST(BenchCollectives, MpiBackendRunsItselfUnderMpirunWithNoWrongResults) {
  if (!mpirun_on_path()) GTEST_SKIP() << "mpirun is not on PATH";
  Result r = run("bench collectives -n 2 --backend mpi --sizes 4K:16K --iters 3");
  if (r.output.find("this build has no MPI backend") != std::string::npos)
    GTEST_SKIP() << "cohort was built without cohort_comm_mpi";
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 ranks, transport mpi"), std::string::npos) << r.output;
  auto table = rows(r.output);
  ASSERT_EQ(table.size(), 3u) << r.output;  // 4K, 8K, 16K, printed once (by rank 0)
  long long size = 4096;
  for (const Row& row : table) {
    EXPECT_EQ(row.size, size) << r.output;
    EXPECT_EQ(row.count, size / 4);
    EXPECT_EQ(row.wrong, 0) << r.output;
    EXPECT_GT(row.us, 0.0);
    size *= 2;
  }
}

}  // namespace
