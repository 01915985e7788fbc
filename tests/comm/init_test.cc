// cohort::init / comm::join_world: the world of a process, from its environment.
#include <gtest/gtest.h>

#include <vector>

#include "cohort/comm/init.h"

namespace cohort::comm {
namespace {

TEST(JoinWorld, WithoutLauncherVariablesIsAWorldOfOneThatWorks) {
  auto w = join_world({});
  EXPECT_EQ(w->rank, 0);
  EXPECT_EQ(w->size, 1);
  ASSERT_NE(w->group, nullptr);
  std::vector<float> x{1.5f, -2.0f};
  w->group->allreduce({.output = x.data(), .count = x.size(), .op = ReduceOp::avg});
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_FALSE(rendezvous::has_launcher_environment({{"HOME", "/root"}}));
  EXPECT_TRUE(rendezvous::has_launcher_environment({{"WORLD_SIZE", "2"}}));
}

TEST(JoinWorld, IncompleteLauncherVariablesNameWhatIsMissing) {
  try {
    join_world({{"COHORT_WORLD_SIZE", "2"}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("COHORT_RANK"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort::comm
