// LaunchOptions validation, and the secret / multi-node rules that come from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/launch/launcher.h"
#include "cohort/launch/torch_env.h"
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

// Across nodes every launcher restarts its workers (tests/e2e/elastic_nodes_test.cc); a
// parameter server restarting alone is one node's business, so that stays single-node.
TEST(LaunchOptions, RestartsOfParameterServersAreSingleNodeOnly) {
  LaunchOptions o = ok_options();
  o.nnodes = 2;
  o.master = "127.0.0.1:29500";
  o.max_restarts = 1;
  o.num_servers = 1;
  expect_invalid(o, "--max-restarts with --servers is supported on a single node only");
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

// Two launchers as the two nodes of one job: node 1 hosts no store; its workers get global
// ranks 2 and 3 and node 0's address, and the MASTER_PORT node 0 picked and published in the
// store (torch_env.h), so PyTorch ranks on both nodes meet at one TCPStore.
TEST(LaunchSecret, SecondNodeWorkersGetGlobalRanksTheMastersAddressAndItsTorchPort) {
  TempDir dir;
  const uint16_t store_port = detail::pick_free_port("127.0.0.1");
  const std::string seen =
      "echo $COHORT_RANK $COHORT_WORLD_SIZE $COHORT_LOCAL_RANK "
      "$COHORT_NODE_RANK $COHORT_MASTER_ADDR:$COHORT_MASTER_PORT "
      "$GROUP_RANK $MASTER_ADDR:$MASTER_PORT $COHORT_JOB_SECRET > " +
      dir.path() + "/seen.$COHORT_RANK";
  // Node 0's workers stay until node 1's have run, as ranks that rendezvous would: node 0's
  // launcher (and the store with the port in it) lives as long as its workers.
  const std::string stay = "; for i in $(seq 1000); do [ -s " + dir.file("seen.2") + " ] && [ -s " +
                           dir.file("seen.3") + " ] && break; sleep 0.01; done";
  LaunchOptions node[2];
  for (int n = 0; n < 2; ++n) {
    node[n].nproc_per_node = 2;
    node[n].nnodes = 2;
    node[n].node_rank = n;
    node[n].master = "127.0.0.1:" + std::to_string(store_port);
    node[n].command = {"/bin/sh", "-c", n == 0 ? seen + stay : seen};
  }
  // Node 1 first: its launcher waits for node 0 to publish the port.
  std::vector<pid_t> pids;
  for (int n : {1, 0}) {
    pids.push_back(fork_child([&, n] {
      ::setenv("COHORT_JOB_SECRET", kSecret.c_str(), 1);
      return run(node[n]).exit_code;
    }));
  }
  for (pid_t pid : pids) EXPECT_EQ(wait_child(pid), 0);
  const std::string master = "127.0.0.1:" + std::to_string(store_port);
  // rank 0's line: "0 4 0 0 <master> 0 <torch master> <secret>"
  std::istringstream rank0(read_bytes(dir.file("seen.0")));
  std::string field, torch_master;
  for (int i = 0; i < 7 && rank0 >> field; ++i) torch_master = field;
  EXPECT_NE(torch_master, master);
  EXPECT_EQ(torch_master.rfind("127.0.0.1:", 0), 0u) << torch_master;
  EXPECT_EQ(trim(read_bytes(dir.file("seen.2"))),
            "2 4 0 1 " + master + " 1 " + torch_master + " " + kSecret);
  EXPECT_EQ(trim(read_bytes(dir.file("seen.3"))),
            "3 4 1 1 " + master + " 1 " + torch_master + " " + kSecret);
}

// A node other than 0 whose node 0 never comes stops waiting on SIGTERM, starting no worker.
TEST(LaunchSecret, WaitingForNodeZeroEndsOnSigterm) {
  TempDir dir;
  LaunchOptions o;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master = "127.0.0.1:" + std::to_string(detail::pick_free_port("127.0.0.1"));
  o.command = {"/bin/sh", "-c", "touch " + dir.file("started")};
  // 42: run() itself returned 128 + SIGTERM (not the child killed before run() began).
  pid_t pid = fork_child([&] {
    ::setenv("COHORT_JOB_SECRET", kSecret.c_str(), 1);
    return run(o).exit_code == 128 + SIGTERM ? 42 : 1;
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_child(pid, std::chrono::seconds(5)), 42);
  EXPECT_FALSE(cohort::testing::try_read_bytes(dir.file("started")).has_value());
}

}  // namespace
}  // namespace cohort::launch
