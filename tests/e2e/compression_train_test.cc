// `cohort train --workers 2` with ddp.compression (docs/compression.md): real processes learn
// the synthetic task with fp16 and top-k, report compression in metrics.jsonl, and refuse what
// they cannot do yet with errors naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::run_cli;

namespace {

std::string job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --workers 2 --set data.dataset=synthetic"
         " --set data.synthetic_samples=2048 --set data.batch_size=32 --set run.threads=1"
         " --set run.log_every=8 --set run.progress=plain --set comm.timeout_s=30"
         " --set train.epochs=2 --set optim.lr=0.01 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

nlohmann::json summary_of(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line;
  nlohmann::json summary;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "summary") summary = j;
    if (j["event"] == "step") EXPECT_TRUE(j.contains("compress_ratio")) << line;
  }
  return summary;
}

// One run; its summary record.
nlohmann::json train(const std::string& method, const std::string& extra = "") {
  fs::path d = cohort::testing::fresh_dir("cohort_compress_e2e_", method);
  CliResult r = run_cli(job(d, method) + " --set ddp.compression=" + method + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  return summary_of(d / method / "metrics.jsonl");
}

TEST(Compression, Fp16TrainsAndHalvesTheBytes) {
  nlohmann::json s = train("fp16");
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s["compression"], "fp16");
  EXPECT_GT(s["eval_accuracy"].get<double>(), 0.9);  // 10 well-separated classes
  EXPECT_EQ(s["compress_ratio"].get<double>(), 2.0);
  // What the transport moved: the fp16 messages (2 bytes per gradient; with 2 ranks every
  // allreduce algorithm sends one message's worth per rank).
  double steps = s["steps"].get<double>();
  double message = s["compress_message_bytes"].get<double>();
  EXPECT_EQ(message, 2.0 * 535818);  // the MLP's gradients
  EXPECT_NEAR(s["bytes_sent"].get<double>(), steps * message, 0.01 * steps * message);
}

TEST(Compression, TopKWithErrorFeedbackTrainsAndSendsAFiftiethOfTheBytes) {
  nlohmann::json s = train("topk", " --set ddp.topk_ratio=0.01 --set ckpt.enabled=false");
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s["compression"], "topk");
  EXPECT_GT(s["eval_accuracy"].get<double>(), 0.9);
  // 1% of the entries at 8 bytes (index, value) against 4 bytes each: a ratio of 50.
  EXPECT_NEAR(s["compress_ratio"].get<double>(), 50.0, 0.5);
  double steps = s["steps"].get<double>();
  double message = s["compress_message_bytes"].get<double>();
  EXPECT_NEAR(s["bytes_sent"].get<double>(), steps * message, 0.01 * steps * message);
}

TEST(Compression, RandomKDenseTopKBf16SignQsgdAndPowerSgdTrain) {
  for (auto [method, extra] :
       {std::pair<std::string, std::string>{"randomk", " --set ddp.topk_ratio=0.1"},
        {"topk", " --set ddp.sparse_exchange=dense"},
        {"bf16", ""},
        {"signsgd", " --set optim.momentum=0"},
        {"qsgd", " --set ddp.qsgd_levels=16"},
        {"powersgd", " --set ddp.powersgd_rank=4 --set ddp.powersgd_start_step=8"}}) {
    nlohmann::json s = train(method, extra + " --set ckpt.enabled=false");
    ASSERT_FALSE(s.is_null()) << method;
    EXPECT_GT(s["eval_accuracy"].get<double>(), 0.9) << method << extra;
  }
}

// step -> loss of rank 0's step records (a resumed run appends: the last record wins).
std::map<int64_t, double> rank0_losses(const fs::path& metrics) {
  std::map<int64_t, double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step" && j.value("rank", 0) == 0) out[j["step"]] = j["loss"];
  }
  return out;
}

// Runs `args` uninterrupted ("full"), then stopped after the first epoch and resumed
// ("part"); expects the resume from step 32 and rank 0's losses equal, step for step.
void expect_exact_resume(const fs::path& d, const std::string& args) {
  CliResult r = run_cli(job(d, "full") + args);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_cli(job(d, "part") + args + " --set train.epochs=1");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_cli(job(d, "part") + args + " --resume auto");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from step 32"), std::string::npos) << r.output;
  auto full = rank0_losses(d / "full" / "metrics.jsonl");
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(rank0_losses(d / "part" / "metrics.jsonl"), full);
}

// The uninterrupted and the resumed run's last checkpoints hold the same bytes: the model
// and each rank's strategy state.
void expect_same_final_checkpoints(const fs::path& d) {
  const fs::path a = cohort::testing::newest_checkpoint(d / "full");
  const fs::path b = cohort::testing::newest_checkpoint(d / "part");
  for (const char* f :
       {"model.safetensors", "strategy.rank0.safetensors", "strategy.rank1.safetensors"}) {
    ASSERT_TRUE(fs::exists(a / f) && fs::exists(b / f)) << f;
    EXPECT_EQ(cohort::testing::read_bytes(a / f), cohort::testing::read_bytes(b / f)) << f;
  }
}

// fp16 keeps no state across steps: a run stopped after one epoch and resumed ends bit for bit
// where the uninterrupted run does.
TEST(Compression, Fp16ResumesExactly) {
  fs::path d = cohort::testing::fresh_dir("cohort_compress_e2e_", "resume");
  expect_exact_resume(d, " --set ddp.compression=fp16 --set run.log_every=1");
}

// Top-k's error-feedback residuals differ between ranks: each rank's go into its
// strategy.rank<R> checkpoint file, so a resumed run continues bit for bit on both ranks.
TEST(Compression, TopKWithErrorFeedbackResumesExactly) {
  fs::path d = cohort::testing::fresh_dir("cohort_compress_e2e_", "resume_topk");
  expect_exact_resume(d,
                      " --set ddp.compression=topk --set ddp.topk_ratio=0.05"
                      " --set run.log_every=1 --set ckpt.async=false");
  expect_same_final_checkpoints(d);
}

// PowerSGD's Qs and residuals travel in the per-rank files too: after its warm-up (5 plain
// steps) and 27 factorized ones, the resumed run goes on bit for bit.
TEST(Compression, PowerSgdResumesExactly) {
  fs::path d = cohort::testing::fresh_dir("cohort_compress_e2e_", "resume_powersgd");
  expect_exact_resume(d,
                      " --set ddp.compression=powersgd --set ddp.powersgd_rank=2"
                      " --set ddp.powersgd_start_step=5 --set run.log_every=1"
                      " --set ckpt.async=false");
  expect_same_final_checkpoints(d);
}

TEST(Compression, WhatCannotWorkIsRefusedNamingTheKey) {
  fs::path d = cohort::testing::fresh_dir("cohort_compress_e2e_", "errors");
  CliResult r = run_cli(job(d, "a") + " --set ddp.compression=powersdg");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("ddp.compression"), std::string::npos) << r.output;
}

}  // namespace
