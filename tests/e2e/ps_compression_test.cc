// Compressed parameter-server pushes (ps.compression, docs/ps.md) end to end with real
// processes, on the PS e2e tests' small job (ps_job.h: 20 steps, 2 workers, 2 servers): fp16
// and bf16 train like uncompressed pushes in BSP; top-k 10% with error feedback learns; ASP
// with compressed pushes learns; a server killed mid-run gets the kept compressed pushes
// replayed and BSP ends bit-identical; bad values are refused naming the key.
#include <gtest/gtest.h>

#include <algorithm>
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
using cohort::testing::contains;
using cohort::testing::ps_job;
using cohort::testing::run_cli;

namespace {

const std::string kPs =
    " --set parallel.strategy=ps --set optim.momentum=0.9 --workers 2 --servers 2";

nlohmann::json summary(const fs::path& run) {
  return cohort::testing::last_record(run / "metrics.jsonl", "summary");
}

// The loss of the step record of `step`.
double loss_at(const fs::path& run, int64_t step) {
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step" && j["step"] == step) return j["loss"].get<double>();
  }
  return -1;
}

cohort::NamedTensors final_model(const fs::path& run) {
  return cohort::ckpt::read_safetensors(
      (cohort::testing::newest_checkpoint(run) / "model.safetensors").string());
}

// Every value within `rel` of its tensor's largest magnitude.
void expect_close(const cohort::NamedTensors& a, const cohort::NamedTensors& b, float rel,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<float> x = a[i].second.to_vector<float>(), y = b[i].second.to_vector<float>();
    ASSERT_EQ(x.size(), y.size()) << what;
    float scale = 0;
    for (float v : y) scale = std::max(scale, std::fabs(v));
    size_t bad = 0;
    for (size_t k = 0; k < x.size(); ++k) bad += std::fabs(x[k] - y[k]) > rel * scale;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " values of " << a[i].first << " differ";
  }
}

// The synthetic job learned: an untrained model's loss is over 1 (BSP's step 5: 1.54), a
// trained one's below 1e-3 (uncompressed: 3e-7), its accuracy 100%.
void expect_learned(const nlohmann::json& s, const std::string& what) {
  EXPECT_LT(s["eval_loss"].get<double>(), 0.05) << what << " " << s.dump();
  EXPECT_GE(s["eval_accuracy"].get<double>(), 0.95) << what << " " << s.dump();
}

// Runs `name` with `extra`; its summary (the run must succeed).
nlohmann::json train(const fs::path& d, const std::string& name, const std::string& extra) {
  CliResult r = run_cli(ps_job(d, name, 32) + kPs + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  return summary(d / name);
}

// The synthetic job is easy (every run's final loss is about 3e-7), so closeness is read
// mid-run, at step 10's loss (about 0.045), and on the final weights.
TEST(PsCompression, BspWithFp16OrBf16PushesEndsCloseToUncompressedWithHalfTheBytes) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "cast");
  const nlohmann::json none = train(d, "none", "");
  EXPECT_FALSE(none.contains("compress_ratio")) << none.dump();
  const cohort::NamedTensors reference = final_model(d / "none");
  for (std::string m : {"fp16", "bf16"}) {
    const nlohmann::json s = train(d, m, " --set ps.compression=" + m);
    EXPECT_EQ(s["compression"], m) << s.dump();
    EXPECT_EQ(s["steps"], 20) << s.dump();
    EXPECT_NEAR(loss_at(d / m, 10), loss_at(d / "none", 10), 0.01 * loss_at(d / "none", 10)) << m;
    EXPECT_NEAR(s["eval_loss"].get<double>(), none["eval_loss"].get<double>(), 1e-3) << m;
    // Measured: fp16 within 2e-4 of the largest weight, bf16 (8 mantissa bits against fp16's
    // 11) within 2e-2.
    expect_close(final_model(d / m), reference, m == "fp16" ? 1e-3f : 5e-2f, m);
    EXPECT_EQ(2 * s["push_bytes"].get<uint64_t>(), none["push_bytes"].get<uint64_t>()) << m;
    EXPECT_DOUBLE_EQ(s["compress_ratio"].get<double>(), 2.0) << s.dump();
    EXPECT_GE(s["compress_encode_ms"].get<double>(), 0.0) << s.dump();
  }
}

TEST(PsCompression, TopKTenPercentWithErrorFeedbackLearns) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "topk");
  const nlohmann::json s = train(d, "topk", " --set ps.compression=topk --set ps.topk_ratio=0.1");
  expect_learned(s, "topk");
  // 10% of the values as (u32 index, f32 value) pairs: 5x fewer bytes.
  EXPECT_NEAR(s["compress_ratio"].get<double>(), 5.0, 0.01) << s.dump();
}

TEST(PsCompression, AspWithCompressedPushesLearns) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_codec_", "asp");
  // (signsgd learns too, but ASP's 40 sign steps leave its loss between 0.1 and 0.7 here.)
  for (std::string m : {"fp16", "topk"}) {
    const nlohmann::json s =
        train(d, m, " --set ps.mode=asp --set optim.lr=0.05 --set ps.compression=" + m);
    EXPECT_EQ(s["steps"], 20) << s.dump();
    expect_learned(s, m);
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
  const cohort::NamedTensors whole = final_model(d / "whole"), killed = final_model(d / "killed");
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
