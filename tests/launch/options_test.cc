// LaunchOptions validation, and the secret / multi-node rules that come from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>

#include "cohort/core/error.h"
#include "cohort/launch/launcher.h"
#include "tests/launch/launch_test_util.h"

namespace cohort::launch {
namespace {

using cohort::testing::fork_child;
using cohort::testing::read_bytes;
using cohort::testing::TempDir;
using cohort::testing::trim;
using cohort::testing::wait_child;

LaunchOptions ok_options() {
  LaunchOptions o;
  o.command = {"/bin/true"};
  return o;
}

// run(o) throws InvalidArgument whose message contains `expected`.
void expect_invalid(const LaunchOptions& o, const std::string& expected) {
  try {
    run(o);
    ADD_FAILURE() << "expected InvalidArgument containing: " << expected;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

bool secret_in_environment() {
  return ::getenv("COHORT_JOB_SECRET") || ::getenv("COHORT_JOB_SECRET_FILE");
}

TEST(LaunchOptions, ZeroWorkersIsRefused) {
  LaunchOptions o = ok_options();
  o.nproc_per_node = 0;
  expect_invalid(o, "-n (workers per node) must be >= 1, got 0");
}

TEST(LaunchOptions, EmptyCommandIsRefused) {
  LaunchOptions o = ok_options();
  o.command.clear();
  expect_invalid(o, "no program given");
}

TEST(LaunchOptions, NodeRankOutOfRangeIsRefused) {
  LaunchOptions o = ok_options();
  o.nnodes = 2;
  o.node_rank = 2;
  o.master = "127.0.0.1:29500";
  expect_invalid(o, "--node-rank 2 is out of range for --nnodes 2");
}

TEST(LaunchOptions, MultiNodeNeedsAMasterAddress) {
  LaunchOptions o = ok_options();
  o.nnodes = 2;
  expect_invalid(o, "needs --master ADDR:PORT");
}

TEST(LaunchOptions, MalformedMasterIsRefused) {
  LaunchOptions o = ok_options();
  o.master = "localhost";
  expect_invalid(o, "--master 'localhost' is not ADDR:PORT");
  o.master = "127.0.0.1:http";
  expect_invalid(o, "the port must be a number");
}

TEST(LaunchOptions, MultiNodeWithoutASharedSecretIsRefused) {
  if (secret_in_environment()) GTEST_SKIP() << "COHORT_JOB_SECRET(_FILE) is set in this shell";
  LaunchOptions o = ok_options();
  o.nnodes = 2;
  o.master = "127.0.0.1:29500";
  expect_invalid(o, "set COHORT_JOB_SECRET (hex");
  expect_invalid(o, "COHORT_JOB_SECRET_FILE to the same value on every node");
}

TEST(LaunchOptions, RestartsAreSingleNodeOnly) {
  LaunchOptions o = ok_options();
  o.nnodes = 2;
  o.master = "127.0.0.1:29500";
  o.max_restarts = 1;
  expect_invalid(o, "--max-restarts 1 is supported only on a single node");
}

// Runs `run` in a child whose environment has `env` set; the child exits with the result.
int run_with_env(const std::map<std::string, std::string>& env, const LaunchOptions& o) {
  pid_t pid = fork_child([&] {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    return run(o).exit_code;
  });
  return wait_child(pid);
}

const std::string kSecret(64, 'a');

TEST(LaunchSecret, ASecretInTheLaunchersEnvironmentIsReused) {
  TempDir dir;
  LaunchOptions o;
  o.command = {"/bin/sh", "-c", "echo $COHORT_JOB_SECRET > " + dir.file("secret")};
  ASSERT_EQ(run_with_env({{"COHORT_JOB_SECRET", kSecret}}, o), 0);
  EXPECT_EQ(trim(read_bytes(dir.file("secret"))), kSecret);
}

TEST(LaunchSecret, ASecretFileIsReadAndPassedAsHex) {
  TempDir dir;
  { std::ofstream(dir.file("key")) << kSecret << "\n"; }
  LaunchOptions o;
  o.command = {
      "/bin/sh", "-c",
      "echo \"$COHORT_JOB_SECRET ${COHORT_JOB_SECRET_FILE:-nofile}\" > " + dir.file("seen")};
  ASSERT_EQ(run_with_env({{"COHORT_JOB_SECRET_FILE", dir.file("key")}}, o), 0);
  // The worker gets the hex only: bootstrap refuses both variables at once.
  EXPECT_EQ(trim(read_bytes(dir.file("seen"))), kSecret + " nofile");
}

// Node 1 of 2 hosts no store; its workers get global ranks 2 and 3 and node 0's address.
TEST(LaunchSecret, SecondNodeWorkersGetGlobalRanksAndTheMastersAddress) {
  TempDir dir;
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master = "127.0.0.1:29511";
  o.command = {"/bin/sh", "-c",
               "echo $COHORT_RANK $COHORT_WORLD_SIZE $COHORT_LOCAL_RANK $COHORT_NODE_RANK "
               "$COHORT_MASTER_ADDR:$COHORT_MASTER_PORT $COHORT_JOB_SECRET > " +
                   dir.path() + "/seen.$COHORT_LOCAL_RANK"};
  ASSERT_EQ(run_with_env({{"COHORT_JOB_SECRET", kSecret}}, o), 0);
  EXPECT_EQ(trim(read_bytes(dir.file("seen.0"))), "2 4 0 1 127.0.0.1:29511 " + kSecret);
  EXPECT_EQ(trim(read_bytes(dir.file("seen.1"))), "3 4 1 1 127.0.0.1:29511 " + kSecret);
}

}  // namespace
}  // namespace cohort::launch
