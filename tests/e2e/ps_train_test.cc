// `cohort train --workers N --servers S` (parallel.strategy = "ps") end to end, with real
// processes: BSP over 1 and 2 servers trains exactly like one process with the combined batch,
// and the launch refuses what this version does not support, each with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::newest_checkpoint;
using cohort::testing::run_cli;

namespace {

bool contains(const CliResult& r, const std::string& s) {
  return r.output.find(s) != std::string::npos;
}

// 1280 synthetic samples: 20 steps of 2 x 32 (two workers) or of 64 (one).
std::string job(const fs::path& dir, const std::string& name, int batch) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=1280"
         " --set data.batch_size=" +
         std::to_string(batch) +
         " --set run.threads=1 --set run.log_every=5 --set run.progress=none"
         " --set comm.timeout_s=30 --set ckpt.async=false --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

cohort::NamedTensors final_model(const fs::path& run) {
  return cohort::ckpt::read_safetensors((newest_checkpoint(run) / "model.safetensors").string());
}

// Every parameter within 1e-5 relative (of the tensor's largest magnitude, so that values
// near zero are not held to a tighter bound than float rounding allows).
void expect_close(const cohort::NamedTensors& a, const cohort::NamedTensors& b,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first) << what;
    std::vector<float> x = a[i].second.to_vector<float>(), y = b[i].second.to_vector<float>();
    ASSERT_EQ(x.size(), y.size()) << what << " " << a[i].first;
    float scale = 0;
    for (float v : y) scale = std::max(scale, std::fabs(v));
    size_t bad = 0;
    for (size_t k = 0; k < x.size(); ++k) bad += std::fabs(x[k] - y[k]) > 1e-5f * scale;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " values of " << a[i].first << " differ";
  }
}

nlohmann::json summary(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line;
  nlohmann::json last;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "summary") last = j;
  }
  return last;
}

void bsp_equals_one_process(const std::string& optim) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_e2e_", "bsp");
  CliResult one = run_cli(job(d, "one", 64) + optim);
  ASSERT_EQ(one.status, 0) << one.output;
  const cohort::NamedTensors reference = final_model(d / "one");
  struct Run {
    std::string name;
    int servers, batch;
    std::string extra;
  };
  // The last: two micro-batches of 16 per step (the push happens in step()).
  for (const Run& r : {Run{"ps1", 1, 32, ""}, Run{"ps2", 2, 32, ""},
                       Run{"ps2_accum", 2, 16, " --set train.grad_accum_steps=2"}}) {
    const std::string& name = r.name;
    const int servers = r.servers;
    CliResult ps =
        run_cli(job(d, name, r.batch) + optim + r.extra +
                " --set parallel.strategy=ps --workers 2 --servers " + std::to_string(servers));
    ASSERT_EQ(ps.status, 0) << ps.output;
    EXPECT_TRUE(contains(ps, "[server " + std::to_string(servers - 1) + "]")) << ps.output;
    EXPECT_TRUE(newest_checkpoint(d / name).string().ends_with("step-0000000020"));
    expect_close(final_model(d / name), reference, name);
    nlohmann::json s = summary(d / name / "metrics.jsonl");
    EXPECT_EQ(s["steps"], 20);
    EXPECT_GT(s["bytes_sent"].get<double>(), 0) << s.dump();
    EXPECT_GT(s["bytes_received"].get<double>(), 0) << s.dump();
    EXPECT_GT(s["comm_ms"].get<double>(), 0) << s.dump();
  }
}

TEST(PsTrain, BspOnOneAndTwoServersEqualsOneProcessWithTheCombinedBatchPlainSgd) {
  bsp_equals_one_process(" --set optim.momentum=0");
}

TEST(PsTrain, BspOnOneAndTwoServersEqualsOneProcessWithTheCombinedBatchMomentum) {
  bsp_equals_one_process(" --set optim.momentum=0.9 --set optim.weight_decay=0.01");
}

TEST(PsTrain, RunStartsServersWithTheirRoleAndAFailedServerStopsTheJob) {
  CliResult r = run_cli(
      "run -n 2 --servers 2 -- sh -c 'echo role=$COHORT_ROLE index=$COHORT_SERVER_INDEX "
      "servers=$COHORT_NUM_SERVERS workers=$COHORT_NUM_WORKERS rank=$COHORT_RANK'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "2 workers and 2 parameter servers")) << r.output;
  EXPECT_TRUE(contains(r, "[server 1] role=server index=1 servers=2 workers=2 rank=\n"))
      << r.output;
  EXPECT_TRUE(contains(r, "[rank 1] role= index= servers=2 workers= rank=1")) << r.output;
  CliResult failed =
      run_cli("run -n 1 --servers 1 -- sh -c '[ \"$COHORT_ROLE\" = server ] && exit 3; sleep 30'");
  EXPECT_EQ(failed.status, 3) << failed.output;
  EXPECT_TRUE(contains(failed, "server 0 exited with")) << failed.output;
  CliResult nodes = run_cli("run -n 1 --servers 1 --nnodes 2 --master 127.0.0.1:1 -- true");
  EXPECT_NE(nodes.status, 0) << nodes.output;
  EXPECT_TRUE(contains(nodes, "multi-node parameter servers and server restarts come later"))
      << nodes.output;
}

TEST(PsTrain, WhatThisVersionDoesNotSupportIsRefusedClearly) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_e2e_", "refuse");
  const std::string ps = " --set parallel.strategy=ps";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {" --workers 2 --servers 1", "--servers needs parallel.strategy = 'ps'"},
      {ps + " --workers 2", "'ps' needs parameter servers: add --servers S"},
      {ps + " --workers 2 --servers 1 --max-restarts 1",
       "--servers is supported on a single node without --max-restarts"},
      {ps + " --workers 2 --servers 1 --set optim.clip_grad_norm=1",
       "does not support optim.clip_grad_norm yet"},
      {ps + " --workers 2 --servers 1 --resume auto", "'ps' cannot resume yet"},
      {ps, "'ps' needs parameter servers"},
  };
  for (const Case& c : cases) {
    CliResult r = run_cli(job(d, "r", 32) + c.args);
    EXPECT_NE(r.status, 0) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r, c.message)) << c.args << "\n" << r.output;
  }
}

}  // namespace
