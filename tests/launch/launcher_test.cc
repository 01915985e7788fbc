// cohort::launch::run with real worker processes (/bin/sh scripts and a store client).
#include "cohort/launch/launcher.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "cohort/rendezvous/bootstrap.h"
#include "tests/launch/launch_test_util.h"

namespace cohort::launch {
namespace {

using cohort::testing::fork_child;
using cohort::testing::process_gone;
using cohort::testing::read_bytes;
using cohort::testing::read_pid;
using cohort::testing::TempDir;
using cohort::testing::trim;
using cohort::testing::try_read_bytes;
using cohort::testing::wait_child;
using cohort::testing::wait_for_files;
using namespace std::chrono_literals;

LaunchOptions sh(int n, const std::string& script) {
  LaunchOptions o;
  o.nproc_per_node = n;
  o.command = {"/bin/sh", "-c", script};
  o.stop_grace = 500ms;
  return o;
}

// "KEY=VALUE" lines (as written by `env`) into a map.
std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

TEST(Launcher, EveryWorkerGetsItsRankAndTheJobInTheEnvironmentAndOutputIsTagged) {
  TempDir dir;
  LaunchOptions o = sh(3, "env | grep -E '^(COHORT_|EXTRA_)' > " + dir.path() +
                              "/env.$COHORT_RANK; echo hello from $COHORT_RANK; "
                              "printf 'no newline %s' $COHORT_RANK");
  o.extra_env = {{"EXTRA_FLAG", "on"}};
  ::testing::internal::CaptureStdout();
  LaunchResult r = run(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.failed_rank, -1);
  EXPECT_EQ(r.restarts, 0);

  std::string secret, port;
  for (int rank = 0; rank < 3; ++rank) {
    auto env = parse_env(read_bytes(dir.file("env." + std::to_string(rank))));
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(env["COHORT_RANK"], std::to_string(rank));
    EXPECT_EQ(env["COHORT_LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["COHORT_WORLD_SIZE"], "3");
    EXPECT_EQ(env["COHORT_LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["COHORT_NODE_RANK"], "0");
    EXPECT_EQ(env["COHORT_MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["COHORT_STORE_EXTERNAL"], "1");
    EXPECT_EQ(env["COHORT_RESTART_COUNT"], "0");
    EXPECT_EQ(env["EXTRA_FLAG"], "on");
    EXPECT_TRUE(std::regex_match(env["COHORT_JOB_SECRET"], std::regex("[0-9a-f]{64}")))
        << env["COHORT_JOB_SECRET"];
    EXPECT_GT(std::stoi(env["COHORT_MASTER_PORT"]), 0);
    if (rank == 0) {
      secret = env["COHORT_JOB_SECRET"];
      port = env["COHORT_MASTER_PORT"];
    }
    EXPECT_EQ(env["COHORT_JOB_SECRET"], secret);
    EXPECT_EQ(env["COHORT_MASTER_PORT"], port);
    EXPECT_NE(
        out.find("[rank " + std::to_string(rank) + "] hello from " + std::to_string(rank) + "\n"),
        std::string::npos)
        << out;
    // A partial last line is printed at exit, with its tag and a newline added.
    EXPECT_NE(
        out.find("[rank " + std::to_string(rank) + "] no newline " + std::to_string(rank) + "\n"),
        std::string::npos)
        << out;
  }
}

// torchrun's variables too, so a PyTorch program runs under `cohort run` unchanged; cohort's
// own bootstrap still reads the COHORT_* ones and joins the cohort store, not MASTER_PORT.
TEST(Launcher, WorkersAlsoGetTorchrunsVariablesWithAPortOfTheirOwn) {
  TempDir dir;
  // Each rank writes its environment atomically (tmp + mv). In the first attempt rank 1 fails,
  // but only once rank 0's file is complete: the launcher stops rank 0 as soon as rank 1 exits.
  std::string file = dir.path() + "/env.$COHORT_RESTART_COUNT.$COHORT_RANK";
  LaunchOptions o =
      sh(2, "env > " + file + ".tmp && mv " + file + ".tmp " + file + "; " +
                "if [ $COHORT_RESTART_COUNT = 0 ] && [ $COHORT_RANK = 1 ]; then " + "until [ -f " +
                dir.path() + "/env.0.0 ]; do sleep 0.01; done; " + "exit 3; fi; exit 0");
  o.max_restarts = 1;
  LaunchResult r = run(o);
  ASSERT_EQ(r.exit_code, 0) << r.message;
  ASSERT_EQ(r.restarts, 1);
  std::map<int, std::string> torch_port;  // by attempt
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      SCOPED_TRACE("attempt " + std::to_string(attempt) + " rank " + std::to_string(rank));
      auto env = parse_env(
          read_bytes(dir.file("env." + std::to_string(attempt) + "." + std::to_string(rank))));
      EXPECT_EQ(env["RANK"], std::to_string(rank));
      EXPECT_EQ(env["WORLD_SIZE"], "2");
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
      EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
      EXPECT_EQ(env["GROUP_RANK"], "0");
      EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
      EXPECT_EQ(env["ROLE_NAME"], "default");
      EXPECT_EQ(env["ROLE_RANK"], std::to_string(rank));
      EXPECT_EQ(env["ROLE_WORLD_SIZE"], "2");
      EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
      EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], std::to_string(attempt));
      EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "1");
      EXPECT_EQ(env.count("TORCHELASTIC_USE_AGENT_STORE"), 0u);
      // PyTorch's rank 0 serves its own store on MASTER_PORT: never the cohort store's port.
      ASSERT_GT(std::stoi(env["MASTER_PORT"]), 0);
      EXPECT_NE(env["MASTER_PORT"], env["COHORT_MASTER_PORT"]);
      if (rank == 0) torch_port[attempt] = env["MASTER_PORT"];
      EXPECT_EQ(env["MASTER_PORT"], torch_port[attempt]);  // one port for the whole job
      // cohort's bootstrap: its own variables win over torchrun's.
      rendezvous::EnvMap map(env.begin(), env.end());
      const rendezvous::WorldInfo w = rendezvous::world_from_env(map);
      EXPECT_EQ(w.source, rendezvous::EnvConvention::kCohort);
      EXPECT_EQ(w.master_port, std::stoi(env["COHORT_MASTER_PORT"]));
      EXPECT_EQ(w.rank, rank);
    }
  }
}

TEST(Launcher, UntaggedOutputPassesLinesThroughUnchanged) {
  LaunchOptions o = sh(1, "echo plain line");
  o.tag_output = false;
  ::testing::internal::CaptureStdout();
  LaunchResult r = run(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(out, "plain line\n");
}

TEST(Launcher, FreshSecretPerJob) {
  TempDir dir;
  const std::string script = "echo $COHORT_JOB_SECRET > " + dir.path() + "/secret.$N";
  LaunchOptions a = sh(1, script), b = sh(1, script);
  a.extra_env = {{"N", "a"}};
  b.extra_env = {{"N", "b"}};
  ASSERT_EQ(run(a).exit_code, 0);
  ASSERT_EQ(run(b).exit_code, 0);
  EXPECT_NE(try_read_bytes(dir.file("secret.a")), try_read_bytes(dir.file("secret.b")));
}

// The first failure stops everyone: a sleeping worker that even ignores SIGTERM (and its own
// child) is SIGKILLed after the grace period; the result names the rank, its code, its output.
TEST(Launcher, WorkerExitingNonZeroStopsTheOthersAndIsReported) {
  TempDir dir;
  const std::string d = dir.path();
  LaunchOptions o = sh(3,
                       "if [ $COHORT_RANK = 1 ]; then "
                       "  for i in $(seq 500); do [ -s " +
                           d + "/child.0 ] && [ -s " + d +
                           "/child.2 ] && break; sleep 0.01; done; "
                           "  echo about to fail; echo last words >&2; exit 3; "
                           "fi; "
                           "trap '' TERM; echo $$ > " +
                           d +
                           "/pid.$COHORT_RANK; "
                           "sleep 30 & echo $! > " +
                           d + "/child.$COHORT_RANK; wait");
  o.stop_grace = 200ms;
  const auto start = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStdout();
  LaunchResult r = run(o);
  ::testing::internal::GetCapturedStdout();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_NE(r.message.find("rank 1 exited with exit code 3"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("about to fail"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("last words"), std::string::npos) << r.message;
  for (int rank : {0, 2}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    pid_t worker = read_pid(dir.file("pid." + std::to_string(rank)));
    pid_t child = read_pid(dir.file("child." + std::to_string(rank)));
    ASSERT_GT(worker, 0);
    ASSERT_GT(child, 0);
    errno = 0;
    EXPECT_EQ(::kill(worker, 0), -1);  // reaped by run(): no zombie left either
    EXPECT_EQ(errno, ESRCH);
    EXPECT_TRUE(process_gone(child));  // the worker's own child died with its group
  }
}

TEST(Launcher, WorkerKilledBySignalIsReportedWithTheSignal) {
  LaunchResult r = run(sh(2, "if [ $COHORT_RANK = 1 ]; then echo dying; kill -9 $$; fi; exit 0"));
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_NE(r.message.find("rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("dying"), std::string::npos) << r.message;
}

TEST(Launcher, MissingProgramExits127WithTheReason) {
  LaunchOptions o;
  o.command = {"/nonexistent/cohort-no-such-program"};
  LaunchResult r = run(o);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_NE(r.message.find("cannot execute '/nonexistent/cohort-no-such-program'"),
            std::string::npos)
      << r.message;
}

TEST(Launcher, RestartRunsAllWorkersAgainWithAFreshStore) {
  TempDir dir;
  LaunchOptions o =
      sh(2, "echo $COHORT_MASTER_PORT > " + dir.path() +
                "/port.$COHORT_RESTART_COUNT.$COHORT_RANK; "
                "if [ $COHORT_RESTART_COUNT = 0 ] && [ $COHORT_RANK = 1 ]; then exit 5; "
                "fi; exit 0");
  o.max_restarts = 1;
  LaunchResult r = run(o);
  EXPECT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.failed_rank, -1);
  EXPECT_EQ(r.restarts, 1);
  auto first = try_read_bytes(dir.file("port.0.1"));
  auto second = try_read_bytes(dir.file("port.1.1"));
  ASSERT_TRUE(first && second);
  EXPECT_NE(*first, *second) << "the restarted attempt must get a fresh store";
  EXPECT_EQ(try_read_bytes(dir.file("port.1.0")), second);
}

TEST(Launcher, RestartsRunOutAndTheLastFailureIsReported) {
  LaunchOptions o = sh(2, "[ $COHORT_RANK = 0 ] && exit 4; exit 0");
  o.max_restarts = 2;
  LaunchResult r = run(o);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_EQ(r.restarts, 2);
  EXPECT_NE(r.message.find("restarts used: 2 of 2"), std::string::npos) << r.message;
}

// Stopping workers right after spawning them (some may not have exec'd yet) must not look like
// a signal to the launcher: a forked child briefly shares the launcher's signal handlers.
TEST(Launcher, StoppingFreshlyForkedWorkersIsNotMistakenForASignalToTheLauncher) {
  for (int i = 0; i < 5; ++i) {
    LaunchResult r = run(sh(8, "[ $COHORT_RANK = 0 ] && exit 1; exec sleep 30"));
    ASSERT_EQ(r.exit_code, 1) << r.message;
    ASSERT_EQ(r.failed_rank, 0) << r.message;
  }
}

// SIGTERM to the launcher is forwarded to every worker; it then returns 128 + 15.
TEST(Launcher, SigtermToTheLauncherStopsEveryWorker) {
  TempDir dir;
  const std::string d = dir.path();
  pid_t launcher = fork_child([&] {
    LaunchResult r = run(sh(2, "echo $$ > " + d + "/pid.$COHORT_RANK; exec sleep 30"));
    return r.exit_code;
  });
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(wait_for_files({dir.file("pid.0"), dir.file("pid.1")}));
  const pid_t w0 = read_pid(dir.file("pid.0")), w1 = read_pid(dir.file("pid.1"));
  ASSERT_EQ(::kill(launcher, SIGTERM), 0);
  EXPECT_EQ(wait_child(launcher, 10s), 128 + SIGTERM);
  EXPECT_TRUE(process_gone(w0));
  EXPECT_TRUE(process_gone(w1));
}

// A second signal does not wait for the grace period: workers that ignore SIGTERM are killed.
TEST(Launcher, SecondSignalToTheLauncherKillsAtOnce) {
  TempDir dir;
  const std::string d = dir.path();
  pid_t launcher = fork_child([&] {
    LaunchOptions o = sh(2, "trap '' TERM; echo $$ > " + d + "/pid.$COHORT_RANK; sleep 30 & wait");
    o.stop_grace = 60s;
    return run(o).exit_code;
  });
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(wait_for_files({dir.file("pid.0"), dir.file("pid.1")}));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launcher, SIGINT), 0);
  ASSERT_EQ(::kill(launcher, SIGINT), 0);
  EXPECT_EQ(wait_child(launcher, 10s), 128 + SIGINT);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(process_gone(read_pid(dir.file("pid.0"))));
  EXPECT_TRUE(process_gone(read_pid(dir.file("pid.1"))));
}

// The launcher dying (SIGKILL: no chance to clean up) takes its workers along (PDEATHSIG).
TEST(Launcher, WorkersDieWithAKilledLauncher) {
  TempDir dir;
  const std::string d = dir.path();
  pid_t launcher = fork_child(
      [&] { return run(sh(1, "echo $$ > " + d + "/pid.$COHORT_RANK; exec sleep 30")).exit_code; });
  ASSERT_TRUE(wait_for_files({dir.file("pid.0")}));
  ::kill(launcher, SIGKILL);
  EXPECT_EQ(wait_child(launcher, 10s), 128 + SIGKILL);
  EXPECT_TRUE(process_gone(read_pid(dir.file("pid.0"))));
}

// A real worker: connects to the launcher's store with StoreHost::kExternal and counts in.
TEST(Launcher, WorkersRendezvousThroughTheLaunchersStore) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.command = {STORE_WORKER_BIN};
  ::testing::internal::CaptureStdout();
  LaunchResult r = run(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.exit_code, 0) << r.message;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                       " of 3 joined"),
              std::string::npos)
        << out;
  }
}

// After a restart the store is new: the counter starts from zero again.
TEST(Launcher, RestartedWorkersRendezvousAgainInAFreshStore) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {STORE_WORKER_BIN, "--fail-first-attempt"};
  o.max_restarts = 1;
  ::testing::internal::CaptureStdout();
  LaunchResult r = run(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.exit_code, 0) << r.message;
  EXPECT_EQ(r.restarts, 1);
  EXPECT_NE(out.find("[rank 0] rank 0 of 2 joined (restart 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] rank 1 of 2 joined (restart 1)"), std::string::npos) << out;
}

TEST(Launcher, SelfExecutableIsThisTestBinary) {
  const std::string exe = self_executable();
  EXPECT_EQ(exe.front(), '/');
  EXPECT_NE(exe.find("launch_tests"), std::string::npos) << exe;
}

}  // namespace
}  // namespace cohort::launch
