// Pinning workers to cores (`cohort run --bind`): the choice per mode and CPU list, and the
// affinity real worker processes end up with.
#include "cohort/launch/binding.h"

#include <gtest/gtest.h>

#include <fstream>

#include "cohort/core/error.h"
#include "cohort/launch/launcher.h"
#include "tests/launch/launch_test_util.h"

namespace cohort::launch {
namespace {

using cohort::testing::read_bytes;
using cohort::testing::TempDir;

TEST(Binding, AutoPinsTwoOrMoreWorkersThatFitAndNothingElse) {
  const std::vector<int> cpus = {2, 5, 7};
  EXPECT_EQ(worker_cpus(Bind::kAuto, 2, cpus), (std::vector<int>{2, 5}));
  EXPECT_EQ(worker_cpus(Bind::kAuto, 3, cpus), (std::vector<int>{2, 5, 7}));
  EXPECT_TRUE(worker_cpus(Bind::kAuto, 4, cpus).empty());  // more workers than cores
  EXPECT_TRUE(worker_cpus(Bind::kAuto, 1, cpus).empty());  // independent jobs would stack
  EXPECT_TRUE(worker_cpus(Bind::kNone, 2, cpus).empty());
  EXPECT_EQ(worker_cpus(Bind::kCore, 1, cpus), (std::vector<int>{2}));
}

TEST(Binding, CoreWithTooFewCpusAndUnknownModesAreClearErrors) {
  try {
    worker_cpus(Bind::kCore, 4, {0, 1});
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("4 workers, 2 usable CPUs"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_bind("core"), Bind::kCore);
  EXPECT_THROW(parse_bind("socket"), InvalidArgument);
}

// What each worker's /proc/self/status says it may run on.
std::vector<std::string> affinity_of_workers(int n, Bind bind) {
  TempDir dir;
  LaunchOptions o;
  o.nproc_per_node = n;
  o.bind = bind;
  o.command = {
      "/bin/sh", "-c",
      "grep Cpus_allowed_list /proc/self/status | cut -f2 > " + dir.path() + "/cpus.$COHORT_RANK"};
  EXPECT_EQ(run(o).exit_code, 0);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    std::string s = read_bytes(dir.file("cpus." + std::to_string(r)));
    out.push_back(s.substr(0, s.find('\n')));
  }
  return out;
}

TEST(Binding, WorkersRunOnTheirOwnCoreOrWhereverTheLauncherMay) {
  std::vector<int> usable = usable_cpus();
  if (usable.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << usable.size();
  auto pinned = affinity_of_workers(2, Bind::kAuto);
  EXPECT_EQ(pinned[0], std::to_string(usable[0]));
  EXPECT_EQ(pinned[1], std::to_string(usable[1]));
  auto free = affinity_of_workers(2, Bind::kNone);
  EXPECT_EQ(free[0], free[1]);
  EXPECT_NE(free[0], pinned[0]);  // a list or range, not one CPU
}

}  // namespace
}  // namespace cohort::launch
