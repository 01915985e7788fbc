// `--resume auto` of a whole parameter-server job (docs/ps.md, "Resuming a whole job"), real
// processes: the job dies (a server killed without restarts left), and the same command with
// --resume auto goes on from the servers' checkpoints. In BSP the servers agree on the newest
// step they all have, the workers start there, and the run ends bit-identical to one that was
// never interrupted; in ASP each server takes its newest and the job runs to its end.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/e2e/ps_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::run_cli;

namespace {

const std::string kCommon =
    " --set optim.momentum=0.9 --set parallel.strategy=ps --set ckpt.every_steps=5"
    " --workers 2 --servers 2";

// A run that server `index` kills itself in after the update that takes it to `step`.
CliResult killed_run(const fs::path& d, const std::string& name, const std::string& extra,
                     int index, int step) {
  return run_cli(cohort::testing::ps_job(d, name, 32) + kCommon + extra +
                 " --set fault.kill_server=" + std::to_string(index) +
                 " --set fault.kill_server_at_step=" + std::to_string(step));
}

// The step directories of a server's checkpoints, oldest first.
std::vector<fs::path> saves_of(const fs::path& server) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(server)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(PsResume, AWholeBspJobResumesAtTheNewestStepEveryServerHasAndEndsBitIdentical) {
  const fs::path d = cohort::testing::fresh_dir("cohort_ps_e2e_", "resume");
  CliResult whole = run_cli(cohort::testing::ps_job(d, "whole", 32) + kCommon);
  ASSERT_EQ(whole.status, 0) << whole.output;
  // Server 1 dies after step 15's update (checkpoints at steps 5, 10, 15); no restarts: the
  // job stops.
  CliResult died = killed_run(d, "resumed", "", 1, 16);
  ASSERT_NE(died.status, 0) << died.output;
  // As if server 0 had died before writing its step-15 checkpoint: the servers must agree on 10.
  const fs::path server0 = d / "resumed" / "checkpoints" / "server-0";
  fs::path newest;
  for (const auto& e : fs::directory_iterator(server0))
    if (newest.empty() || e.path().filename() > newest.filename()) newest = e.path();
  ASSERT_FALSE(newest.empty()) << died.output;
  fs::remove_all(newest);
  CliResult resumed =
      run_cli(cohort::testing::ps_job(d, "resumed", 32) + kCommon + " --resume auto");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed,
                       "parameter server 1: resuming at step 10, the newest step every "
                       "server has checkpointed (its own newest: 15)"))
      << resumed.output;
  EXPECT_TRUE(contains(resumed,
                       "worker 1 resumed where the parameter servers' checkpoints are "
                       "at step 10 (epoch 0, batch 10)"))
      << resumed.output;
  // Server 1's step-15 checkpoint is kept aside, not deleted.
  EXPECT_EQ(saves_of(d / "resumed" / "checkpoints" / "server-1.earlier" / "1").size(), 1u);
  const cohort::NamedTensors whole_model = cohort::testing::ps_final_model(d / "whole");
  cohort::testing::expect_same_weights(whole_model, cohort::testing::ps_final_model(d / "resumed"),
                                       "resumed BSP job");
  // A job that had finished: its servers' newest checkpoints are the goodbye saves, and every
  // worker comes back (and says goodbye again) with no step left to train.
  CliResult again = run_cli(cohort::testing::ps_job(d, "whole", 32) + kCommon + " --resume auto");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again, "resumed where the parameter servers' checkpoints are at step 20"))
      << again.output;
  cohort::testing::expect_same_weights(whole_model, cohort::testing::ps_final_model(d / "whole"),
                                       "finished job resumed");
}

// BSP servers whose checkpoints share no step cannot resume together: an error that lists
// them, and nothing removed.
TEST(PsResume, BspServersWithNoStepInCommonAreRefusedListingTheirSteps) {
  const fs::path d = cohort::testing::fresh_dir("cohort_ps_e2e_", "resume_apart");
  CliResult died = killed_run(d, "apart", "", 1, 16);
  ASSERT_NE(died.status, 0) << died.output;
  const fs::path ckpt = d / "apart" / "checkpoints";
  std::vector<fs::path> s0 = saves_of(ckpt / "server-0"), s1 = saves_of(ckpt / "server-1");
  ASSERT_GE(s0.size(), 2u) << died.output;
  ASSERT_GE(s1.size(), 2u) << died.output;
  for (size_t i = 1; i < s0.size(); ++i) fs::remove_all(s0[i]);  // server 0: step 5 only
  fs::remove_all(s1[0]);                                         // server 1: 10 and later
  CliResult r = run_cli(cohort::testing::ps_job(d, "apart", 32) + kCommon + " --resume auto");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "--resume auto, but the servers' checkpoints that verify are at steps "
                       "(server 0: 5; server 1: 10"))
      << r.output;
  EXPECT_TRUE(contains(r, "none common to all; they cannot resume together")) << r.output;
  EXPECT_EQ(saves_of(ckpt / "server-0").size(), 1u);
  EXPECT_EQ(saves_of(ckpt / "server-1").size(), s1.size() - 1);
}

TEST(PsResume, AnAspJobResumesFromEachServersNewestCheckpointAndRunsToItsEnd) {
  const fs::path d = cohort::testing::fresh_dir("cohort_ps_e2e_", "resume_asp");
  CliResult died = killed_run(d, "asp", " --set ps.mode=asp", 0, 12);
  ASSERT_NE(died.status, 0) << died.output;
  CliResult resumed =
      run_cli(cohort::testing::ps_job(d, "asp", 32) + kCommon + " --set ps.mode=asp --resume auto");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed, "restarted from its checkpoint")) << resumed.output;
  EXPECT_TRUE(contains(resumed, "resumed where the parameter servers' checkpoints are"))
      << resumed.output;
  EXPECT_TRUE(contains(resumed, "done: 20 steps")) << resumed.output;
}

}  // namespace
