// `--resume auto` of a whole parameter-server job (docs/ps.md, "Resuming a whole job"), real
// processes: the job dies (a server killed without restarts left), and the same command with
// --resume auto goes on from the servers' checkpoints. In BSP the servers agree on the newest
// step they all have, the workers start there, and the run ends bit-identical to one that was
// never interrupted; in ASP each server takes its newest and the job runs to its end.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

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
  cohort::testing::expect_same_weights(cohort::testing::ps_final_model(d / "whole"),
                                       cohort::testing::ps_final_model(d / "resumed"),
                                       "resumed BSP job");
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
