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

// torchrun's spellings of -n and --master, with a space or '=' before the value.
TEST(RunCli, TorchrunFlagNamesAreAccepted) {
  const std::string port = std::to_string(cohort::testing::free_loopback_port());
  for (const std::string& flags :
       {"--nproc_per_node 2 --master_addr 127.0.0.1 --master_port " + port,
        "--nproc-per-node=2 --master-addr=127.0.0.1 --master-port=" + port}) {
    auto r = run_cli("run " + flags + " -- sh -c 'echo port $COHORT_MASTER_PORT'");
    EXPECT_EQ(r.status, 0) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find("cohort run: 2 workers, store 127.0.0.1:" + port + "\n"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("[rank 1] port " + port + "\n"), std::string::npos) << r.output;
  }
}

// A listening socket on loopback, closed when the test ends: a port another program holds.
struct HeldPort {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  HeldPort() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 1);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~HeldPort() { close(fd); }
};

TEST(RunCli, ABusyMasterPortNamesTheOptionAndWhatToDo) {
  HeldPort held;
  const std::string master = "127.0.0.1:" + std::to_string(held.port);
  auto r = run_cli("run -n 1 --master " + master + " -- true");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cohort: error: cohort run: --master " + master + " is in use"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("choose another PORT, or leave --master out"), std::string::npos)
      << r.output;
  // torchrun's spelling of the same address gets the same message.
  r = run_cli("run -n 1 --master-port " + std::to_string(held.port) + " -- true");
  EXPECT_NE(r.output.find("--master " + master + " is in use"), std::string::npos) << r.output;
}

// A restart hosts a fresh store; on a fixed --master port the old one must let go of it first.
TEST(RunCli, RestartsKeepAFixedMasterPort) {
  const std::string master = "127.0.0.1:" + std::to_string(cohort::testing::free_loopback_port());
  auto r = run_cli("run -n 1 --max-restarts 1 --master " + master +
                   " -- sh -c '[ $COHORT_RESTART_COUNT = 0 ] && exit 3; echo attempt "
                   "$COHORT_RESTART_COUNT'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] attempt 1\n"), std::string::npos) << r.output;
}

// torch.distributed's env:// rendezvous without torch: rank 0 serves on MASTER_ADDR:MASTER_PORT
// (free, and not the cohort store's port), the others reach it there.
TEST(RunCli, TorchrunStyleRendezvousOnMasterPortWorks) {
  auto r = run_cli("run -n 3 -- timeout 60 /usr/bin/python3 " COHORT_SOURCE_DIR
                   "/tests/launch/env_rendezvous.py");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] sum of ranks 3 over 3 at 127.0.0.1\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 2] rank 2 of 3 reached rank 0\n"), std::string::npos) << r.output;
}

// `cohort run` as a drop-in for torchrun: an unchanged torch.distributed program (gloo) finds
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT and allreduces across the two workers.
TEST(RunCli, TorchDistributedProgramRunsUnchanged) {
  if (cohort::testing::run_shell("/usr/bin/python3 -c 'import torch' 2>&1").status != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (Debian's python3-torch; "
                    "scripts/install-deps.sh --with-peers installs it)";
  }
  auto r = run_cli("run -n 2 -- timeout 120 /usr/bin/python3 " COHORT_SOURCE_DIR
                   "/tests/launch/torch_allreduce.py");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] allreduce 1.0 at rank 0 of 2\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 1] allreduce 1.0 at rank 1 of 2\n"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cohort::launch
