// Elastic training across nodes (docs/elastic.md "Several nodes"), with real launchers in two
// network namespaces joined by a veth pair: node 0 hosts the store, each node runs 2 workers
// (`cohort run --nnodes 1:2`). The link is cut mid-training: each side names the other within
// 2 s (elastic.detect_s = 1), the store's side goes on with its 2 workers (half of 4), the other
// side stops; the link is restored and node 1's workers rejoin the running job; both launchers
// end cleanly at the time limit with 4 workers. Needs root (ip netns); skipped otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <thread>

#include "tests/e2e/background_job.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/netns.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::BackgroundJob;

constexpr const char* kPort = "29611";  // a fresh namespace: every port is free

std::string random_secret() {
  std::random_device rd;
  std::string hex;
  for (int i = 0; i < 32; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", unsigned(rd() & 0xff));
    hex += b;
  }
  return hex;
}

// Node `node`'s launcher: 2 workers of the MLP on synthetic data until the time limit.
std::string node_args(const testing::Namespaces& ns, int node, const fs::path& dir) {
  return detail::str(
      "run -n 2 --nnodes 1:2 --node-rank ", node, " --master ", ns.address(0), ":", kPort, " -- ",
      COHORT_BIN,
      " train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=4096 --set "
      "model.hidden=[64] --set train.epochs=100000 --set train.time_limit_s=25 --set "
      "train.eval_every=0 --set run.threads=1 --set run.log_every=20 --set run.progress=plain "
      "--set elastic.detect_s=1 --set ckpt.enabled=false --set comm.bind_address=",
      ns.address(node), " --set run.dir=", dir.string(), " --set run.name=nodes");
}

// Seconds from `since` until `job`'s output matches `pattern` (polled every 20 ms), or -1 after
// `within`.
double seconds_until(const BackgroundJob& job, const std::string& pattern, Clock::time_point since,
                     std::chrono::seconds within) {
  const std::regex re(pattern);
  while (Clock::now() - since < within) {
    if (std::regex_search(job.output(), re))
      return std::chrono::duration<double>(Clock::now() - since).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

TEST(ElasticNodes, ACutLinkLeavesTheStoresSideGoingOnAndTheCutNodeRejoinsWhenItIsRestored) {
  testing::Namespaces ns("10.233.0.1", "10.233.0.2");  // first: deleted after the launchers
  if (!ns.error().empty()) GTEST_SKIP() << ns.error();
  const fs::path d = testing::fresh_dir("cohort_elastic_nodes_", "cut");
  const std::string env = "env COHORT_JOB_SECRET=" + random_secret() + " ip netns exec ";
  BackgroundJob node1(node_args(ns, 1, d), d / "node1.log", env + ns.name(1));
  BackgroundJob node0(node_args(ns, 0, d), d / "node0.log", env + ns.name(0));
  const auto start = Clock::now();
  ASSERT_GE(seconds_until(node0, "step [0-9]+/", start, std::chrono::seconds(60)), 0)
      << node0.output() << node1.output();
  std::this_thread::sleep_for(std::chrono::seconds(1));

  ASSERT_EQ(testing::shell("ip -n " + ns.name(1) + " link set " + ns.veth(1) + " down"), 0);
  const auto cut = Clock::now();
  const double named_on_0 =
      seconds_until(node0, "rank [23] sent no heartbeat", cut, std::chrono::seconds(10));
  const double named_on_1 = seconds_until(node1,
                                          "the store \\(store at 10.233.0.1:29611\\) has "
                                          "not answered",
                                          cut, std::chrono::seconds(10));
  std::printf("named after the cut: on node 0 in %.2f s, on node 1 in %.2f s\n", named_on_0,
              named_on_1);
  EXPECT_GE(named_on_0, 0) << node0.output();
  EXPECT_LT(named_on_0, 2.0) << node0.output();
  EXPECT_GE(named_on_1, 0) << node1.output();
  EXPECT_LT(named_on_1, 2.0) << node1.output();
  // Exactly one side goes on: the store's, with half of the workers; the other stops.
  EXPECT_GE(seconds_until(node0, "generation 1: 2 workers \\(4 before\\) go on", cut,
                          std::chrono::seconds(10)),
            0)
      << node0.output();
  EXPECT_GE(seconds_until(node1, "node 1 is cut off from the store", cut, std::chrono::seconds(10)),
            0)
      << node1.output();

  ASSERT_EQ(testing::shell("ip -n " + ns.name(1) + " link set " + ns.veth(1) + " up"), 0);
  const auto restored = Clock::now();
  EXPECT_GE(
      seconds_until(node1, "node 1 reaches the store again", restored, std::chrono::seconds(10)), 0)
      << node1.output();
  for (const char* rank : {"2", "3"})
    EXPECT_GE(seconds_until(node1, std::string("\\[rank ") + rank + "\\].*joined generation",
                            restored, std::chrono::seconds(20)),
              0)
        << node1.output();
  EXPECT_EQ(node0.wait_exit_within(std::chrono::seconds(60)), 0) << node0.output();
  EXPECT_EQ(node1.wait_exit_within(std::chrono::seconds(30)), 0) << node1.output();
  EXPECT_NE(node0.output().find("4 workers at the end"), std::string::npos) << node0.output();
}

}  // namespace
}  // namespace cohort
