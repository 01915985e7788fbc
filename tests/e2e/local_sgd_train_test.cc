// `cohort train --workers 2 --set parallel.strategy=local_sgd` end to end, with real processes:
// H = 1 with plain SGD trains like ddp; with H = 4 the replicas agree after every average and
// the model learns; the warm-up of post-local SGD trains like ddp; bad keys are named; a crash
// and `--resume auto` continue exactly like the uninterrupted run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::last_record;
using cohort::testing::newest_checkpoint;
using cohort::testing::read_bytes;
using cohort::testing::run_cli;

namespace {

// Synthetic 784-feature data (1024 samples: 16 steps per epoch with 2 workers of batch 32),
// the default MLP, one thread per worker, metrics every step.
std::string job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --workers 2 --set data.dataset=synthetic"
         " --set data.synthetic_samples=1024 --set data.batch_size=32 --set run.threads=1"
         " --set run.log_every=1 --set run.progress=plain --set comm.timeout_s=30"
         " --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

std::string local_sgd(int64_t period, int64_t warmup) {
  return " --set parallel.strategy=local_sgd --set local_sgd.report_params_hash=true"
         " --set local_sgd.period=" +
         std::to_string(period) + " --set local_sgd.warmup_steps=" + std::to_string(warmup);
}

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_local_sgd_e2e_", name);
}

// step -> the step record of a metrics file; a resumed run appends, so the last one wins.
std::map<int64_t, nlohmann::json> steps_of(const fs::path& metrics) {
  std::map<int64_t, nlohmann::json> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") out[j["step"].get<int64_t>()] = j;
  }
  return out;
}

std::map<int64_t, double> losses(const fs::path& metrics) {
  std::map<int64_t, double> out;
  for (auto& [step, j] : steps_of(metrics)) out[step] = j["loss"].get<double>();
  return out;
}

CliResult run_ok(const std::string& args) {
  CliResult r = run_cli(args);
  EXPECT_EQ(r.status, 0) << r.output;
  return r;
}

// The largest difference between two runs' final model parameters.
double max_model_difference(const fs::path& run_a, const fs::path& run_b) {
  auto a = cohort::ckpt::read_safetensors(newest_checkpoint(run_a) / "model.safetensors");
  auto b = cohort::ckpt::read_safetensors(newest_checkpoint(run_b) / "model.safetensors");
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    if (a[i].second.dtype() != cohort::DType::f32) continue;
    auto va = a[i].second.to_vector<float>(), vb = b[i].second.to_vector<float>();
    for (size_t k = 0; k < va.size(); ++k)
      worst = std::max(worst, double(std::fabs(va[k] - vb[k])));
  }
  return worst;
}

}  // namespace

// Averaging parameters after every plain SGD step is averaging gradients: the same losses on
// both ranks and the same final model as ddp, to float rounding.
TEST(LocalSgdTrain, PeriodOneWithPlainSgdTrainsLikeDdp) {
  fs::path d = fresh_dir("h1");
  std::string common = " --set optim.momentum=0 --set train.epochs=2";
  run_ok(job(d, "ddp") + common);
  run_ok(job(d, "h1") + common + local_sgd(1, 0));
  for (const char* f : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
    auto ddp = losses(d / "ddp" / f), h1 = losses(d / "h1" / f);
    ASSERT_EQ(ddp.size(), 32u) << f;
    ASSERT_EQ(h1.size(), ddp.size()) << f;
    for (auto& [step, loss] : ddp) EXPECT_NEAR(h1[step], loss, 1e-4) << f << " step " << step;
  }
  EXPECT_LT(max_model_difference(d / "ddp", d / "h1"), 1e-5);
  nlohmann::json s = last_record(d / "h1" / "metrics.jsonl", "summary");
  EXPECT_EQ(s["local_sgd_averages"], 32);
}

// H = 4 with momentum: the ranks step alone and agree (the same parameter hash) after each
// average, which alone moves bytes (a quarter of them per step, amortized); the model learns.
TEST(LocalSgdTrain, PeriodFourAgreesAfterEachAverageAndLearns) {
  fs::path d = fresh_dir("h4");
  run_ok(job(d, "h4") + " --set train.epochs=3 --set ckpt.enabled=false" + local_sgd(4, 0));
  auto r0 = steps_of(d / "h4" / "metrics.jsonl"), r1 = steps_of(d / "h4" / "metrics.rank1.jsonl");
  ASSERT_EQ(r0.size(), 48u);
  ASSERT_EQ(r1.size(), r0.size());
  double bytes_averaging = 0;
  for (auto& [step, j] : r0) {
    const nlohmann::json& k = r1[step];
    EXPECT_EQ(j["local_sgd_phase"], "local");
    EXPECT_EQ(j["local_sgd_steps_since_average"], step % 4) << step;
    EXPECT_EQ(k["local_sgd_steps_since_average"], step % 4) << step;
    if (step % 4 == 0) {
      ASSERT_TRUE(j.contains("local_sgd_params_hash")) << step;
      EXPECT_EQ(j["local_sgd_params_hash"], k["local_sgd_params_hash"]) << "step " << step;
      EXPECT_EQ(j["local_sgd_averages"], 1) << step;
      EXPECT_GT(j["local_sgd_bytes_per_step"].get<double>(), 0) << step;
      bytes_averaging = j["local_sgd_bytes_per_step"].get<double>();
    } else {
      EXPECT_FALSE(j.contains("local_sgd_params_hash")) << step;
      EXPECT_EQ(j["local_sgd_bytes_per_step"].get<double>(), 0) << step;
      EXPECT_NE(j["loss"], k["loss"]) << step;  // each rank trains on its own samples
    }
  }
  // The hash changes between averages: the replicas moved, and agree again after each.
  EXPECT_NE(r0[4]["local_sgd_params_hash"], r0[8]["local_sgd_params_hash"]);
  nlohmann::json s = last_record(d / "h4" / "metrics.jsonl", "summary");
  EXPECT_EQ(s["local_sgd_averages"], 12);
  EXPECT_NEAR(s["local_sgd_bytes_per_step"].get<double>(), bytes_averaging / 4, 1.0);
  nlohmann::json eval = last_record(d / "h4" / "metrics.jsonl", "eval");
  EXPECT_GT(eval["accuracy"].get<double>(), 0.9) << eval.dump();
}

// Post-local SGD: the first W = 6 steps average gradients like ddp (the same losses, the
// replicas equal after each), local steps after (the losses part from ddp's).
TEST(LocalSgdTrain, WarmupTrainsLikeDdp) {
  fs::path d = fresh_dir("warmup");
  std::string common = " --set ckpt.enabled=false";
  run_ok(job(d, "ddp") + common);
  run_ok(job(d, "post") + common + local_sgd(4, 6));
  auto ddp = losses(d / "ddp" / "metrics.jsonl");
  auto r0 = steps_of(d / "post" / "metrics.jsonl"),
       r1 = steps_of(d / "post" / "metrics.rank1.jsonl");
  ASSERT_EQ(r0.size(), 16u);
  for (int64_t step = 1; step <= 7; ++step) {  // step 7's loss is of the warm-up's last model
    EXPECT_NEAR(r0[step]["loss"].get<double>(), ddp[step], 1e-4) << "step " << step;
  }
  for (int64_t step = 1; step <= 6; ++step) {
    EXPECT_EQ(r0[step]["local_sgd_phase"], "warmup") << step;
    EXPECT_EQ(r0[step]["local_sgd_steps_since_average"], 0) << step;
    EXPECT_GT(r0[step]["local_sgd_bytes_per_step"].get<double>(), 0) << step;
    EXPECT_EQ(r0[step]["local_sgd_params_hash"], r1[step]["local_sgd_params_hash"]) << step;
  }
  EXPECT_EQ(r0[7]["local_sgd_phase"], "local");
  EXPECT_EQ(r0[7]["local_sgd_steps_since_average"], 1);
  EXPECT_EQ(r0[10]["local_sgd_steps_since_average"], 0);  // 6 + 4
  EXPECT_EQ(r0[10]["local_sgd_params_hash"], r1[10]["local_sgd_params_hash"]);
  double apart = 0;
  for (int64_t step = 9; step <= 16; ++step)
    apart = std::max(apart, std::fabs(r0[step]["loss"].get<double>() - ddp[step]));
  EXPECT_GT(apart, 1e-3);
}

TEST(LocalSgdTrain, BadKeysAreNamed) {
  fs::path d = fresh_dir("bad");
  CliResult zero =
      run_cli(job(d, "zero") + " --set parallel.strategy=local_sgd" + " --set local_sgd.period=0");
  EXPECT_NE(zero.status, 0);
  EXPECT_NE(zero.output.find("local_sgd.period"), std::string::npos) << zero.output;
  CliResult negative = run_cli(job(d, "negative") + " --set parallel.strategy=local_sgd" +
                               " --set local_sgd.warmup_steps=-1");
  EXPECT_NE(negative.status, 0);
  EXPECT_NE(negative.output.find("local_sgd.warmup_steps"), std::string::npos) << negative.output;
}

// Checkpoints every 7 steps fall mid-period (W = 2, H = 4: averages after 6, 10, 14, ...);
// each is a synchronization point, so a crash after step 25 resumed from step 21 gives both
// ranks the same losses, and the same final checkpoint bit for bit, as the uninterrupted run.
TEST(LocalSgdTrain, ResumeAfterCrashIsExact) {
  fs::path d = fresh_dir("resume");
  std::string common =
      " --set train.epochs=2 --set ckpt.every_steps=7 --set ckpt.async=false" + local_sgd(4, 2);
  run_ok(job(d, "full") + common);
  CliResult c = run_cli(job(d, "crash") + common + " --set fault.kill_rank=0" +
                        " --set fault.kill_at_step=25");
  ASSERT_EQ(c.status, 128 + 9) << c.output;
  CliResult resumed = run_ok(job(d, "crash") + common + " --resume auto");
  EXPECT_NE(resumed.output.find("resumed from step 21"), std::string::npos) << resumed.output;
  for (const char* f : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
    auto full = losses(d / "full" / f), crash = losses(d / "crash" / f);
    EXPECT_EQ(full.size(), 32u) << f;
    EXPECT_EQ(full, crash) << f;
  }
  fs::path a = newest_checkpoint(d / "full"), b = newest_checkpoint(d / "crash");
  EXPECT_EQ(a.filename(), "step-0000000032");
  EXPECT_EQ(b.filename(), a.filename());
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_bytes(a / f) == read_bytes(b / f)) << f << " differs";
}
