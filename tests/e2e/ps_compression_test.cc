// Compressed parameter-server pushes (ps.compression, docs/ps.md) end to end with real
// processes, on the PS e2e tests' small job (ps_job.h: 20 steps, 2 workers, 2 servers): fp16
// and bf16 train like uncompressed pushes in BSP; top-k 10% with error feedback learns; ASP
// with compressed pushes learns; a server killed mid-run gets the kept compressed pushes
// replayed and BSP ends bit-identical; bad values are refused naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/ps_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::ps_job;
using cohort::testing::run_cli;

namespace {

const std::string kPs =
    " --set parallel.strategy=ps --set optim.momentum=0.9 --workers 2 --servers 2";

bool contains(const CliResult& r, const std::string& s) {
  return r.output.find(s) != std::string::npos;
}

nlohmann::json summary(const fs::path& run) {
  return cohort::testing::last_record(run / "metrics.jsonl", "summary");
}

// The loss of the first logged step (before most of the training).
double first_loss(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") return j["loss"].get<double>();
  }
  return -1;
}

// Runs `name` with `extra`; its summary (the run must succeed).
nlohmann::json train(const fs::path& d, const std::string& name, const std::string& extra) {
  CliResult r = run_cli(ps_job(d, name, 32) + kPs + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  return summary(d / name);
}

TEST(PsCompression, BspWithFp16OrBf16PushesEndsCloseToUncompressedWithHalfTheBytes) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "cast");
  const nlohmann::json none = train(d, "none", "");
  ASSERT_TRUE(none.contains("eval_loss")) << none.dump();
  EXPECT_FALSE(none.contains("compress_ratio")) << none.dump();
  for (std::string m : {"fp16", "bf16"}) {
    const nlohmann::json s = train(d, m, " --set ps.compression=" + m);
    EXPECT_EQ(s["compression"], m) << s.dump();
    EXPECT_EQ(s["steps"], 20) << s.dump();
    EXPECT_NEAR(s["eval_loss"].get<double>(), none["eval_loss"].get<double>(),
                0.02 * none["eval_loss"].get<double>())
        << m;
    EXPECT_EQ(2 * s["push_bytes"].get<uint64_t>(), none["push_bytes"].get<uint64_t>()) << m;
    EXPECT_DOUBLE_EQ(s["compress_ratio"].get<double>(), 2.0) << s.dump();
    EXPECT_GE(s["compress_encode_ms"].get<double>(), 0.0) << s.dump();
  }
}

TEST(PsCompression, TopKTenPercentWithErrorFeedbackLearns) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "topk");
  const nlohmann::json s = train(d, "topk", " --set ps.compression=topk --set ps.topk_ratio=0.1");
  EXPECT_LT(s["eval_loss"].get<double>(), first_loss(d / "topk")) << s.dump();
  // 10% of the values as (u32 index, f32 value) pairs: 5x fewer bytes.
  EXPECT_NEAR(s["compress_ratio"].get<double>(), 5.0, 0.01) << s.dump();
}

TEST(PsCompression, AspWithCompressedPushesLearns) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "asp");
  for (std::string m : {"fp16", "signsgd"}) {
    const nlohmann::json s =
        train(d, m,
              " --set ps.mode=asp --set optim.lr=0.05 --set ps.compression=" + m +
                  (m == "signsgd" ? " --set optim.momentum=0" : ""));
    EXPECT_EQ(s["steps"], 20) << s.dump();
    EXPECT_LT(s["eval_loss"].get<double>(), first_loss(d / m)) << m << " " << s.dump();
    for (int i : {0, 1}) {
      const nlohmann::json server = cohort::testing::last_record(
          d / m / ("metrics.server" + std::to_string(i) + ".jsonl"), "server_summary");
      EXPECT_EQ(server["updates"], 40) << server.dump();
    }
  }
}

// The kill seam of ps_train_test.cc's restart test, with top-k pushes: server 1 dies after
// step 12's update, restores step 10, and the workers replay their kept frames of steps 10 and
// 11 (not re-encoded: the residual is not applied twice), so BSP ends bit-identical.
TEST(PsCompression, AKilledServerGetsTheKeptCompressedPushesAndBspEndsBitIdentical) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "restart");
  const std::string topk = " --set ps.compression=topk --set ckpt.every_steps=5";
  train(d, "whole", topk);
  CliResult r = run_cli(ps_job(d, "killed", 32) + kPs + topk +
                        " --max-restarts 1 --set fault.kill_server=1"
                        " --set fault.kill_server_at_step=13");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "restarted at step 10; replaying 2 kept pushes")) << r.output;
  auto model = [&](const std::string& name) {
    return cohort::ckpt::read_safetensors(
        (cohort::testing::newest_checkpoint(d / name) / "model.safetensors").string());
  };
  const cohort::NamedTensors whole = model("whole"), killed = model("killed");
  ASSERT_EQ(whole.size(), killed.size());
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_EQ(whole[i].second.to_vector<float>(), killed[i].second.to_vector<float>())
        << whole[i].first;
}

TEST(PsCompression, BadValuesAreRefusedNamingTheKey) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ps.compression=zip", "key 'ps.compression' = \"zip\" is not one of: none, fp16"},
      {"ps.topk_ratio=0", "ps.topk_ratio = 0 is outside (0, 1]"},
      {"ps.topk_ratio=1.5", "ps.topk_ratio"},
      {"ps.qsgd_levels=200", "key 'ps.qsgd_levels' = 200 is out of range [1, 127]"}};
  for (const auto& [set, message] : cases) {
    CliResult r = run_cli(ps_job(d, "bad", 32) + kPs + " --set " + set);
    EXPECT_NE(r.status, 0) << set << "\n" << r.output;
    EXPECT_TRUE(contains(r, message)) << set << "\n" << r.output;
  }
}

}  // namespace
