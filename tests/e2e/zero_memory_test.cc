// ZeRO's memory per rank, as the allocator counts it (docs/zero.md): the GPT example's
// architecture with AdamW in float32 (Psi parameters; DDP holds 16 Psi bytes of model state),
// at 2 and 4 ranks. Held at the end of a step (parameters + gradients + optimizer state):
//   stage 1 <= 1.1 (8 + 8/N) Psi,  stage 2 <= 1.1 (4 + 12/N) Psi,  stage 3 <= 1.1 * 16 Psi / N.
// Stage 3's peak adds what is gathered or reducing at once: at most two units' parameters (the
// one in use and the prefetch) and three units' gradients (one filling, two reducing).
// And the per-rank cap: a GPT whose DDP run does not fit 1 GiB per rank trains under stage 3
// on 4 ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::last_record;
using cohort::testing::run_cli;

namespace {

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_zero_memory_e2e_", name);
}

fs::path write_text(const fs::path& d) {
  fs::path text = d / "text.txt";
  std::ofstream out(text);
  for (int i = 0; i < 300; ++i) out << "In the beginning was the word, and line " << i << ".\n";
  return text;
}

constexpr int64_t kEmbd = 128;  // examples/kjv_gpt.toml
// A GPT block's parameters: qkv, proj, fc, proj (weights and biases) and two layer norms; with
// zero.unit_mb = 1 each block is one unit, the largest.
constexpr int64_t kBlockNumel = 12 * kEmbd * kEmbd + 13 * kEmbd;

std::string example(const fs::path& d, const std::string& name, int workers, int stage) {
  // examples/kjv_gpt.toml's model and optimizer, on a generated text and shorter sequences.
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set model.type=gpt --set model.n_layer=4 --set model.n_head=4 --set model.n_embd=" +
         std::to_string(kEmbd) +
         " --set data.dataset=text --set optim.name=adamw --set optim.lr=0.003"
         " --set optim.weight_decay=0.01 --set optim.beta2=0.99 --set optim.clip_grad_norm=1.0"
         " --set parallel.strategy=" +
         (stage == 0 ? std::string("ddp") : "zero --set zero.stage=" + std::to_string(stage)) +
         " --set data.path=" + (d / "text.txt").string() +
         " --set data.batch_size=4 --set model.block_size=32 --set train.max_steps=3"
         " --set train.eval_batches=1 --set train.sample_bytes=0"
         " --set ckpt.enabled=false --set run.threads=1 --set run.dir=" +
         d.string() + " --set run.name=" + name;
}

double model_state(const nlohmann::json& by_kind) {
  return by_kind.at("parameters").get<double>() + by_kind.at("gradients").get<double>() +
         by_kind.at("optimizer").get<double>() + by_kind.at("communication").get<double>();
}

}  // namespace

TEST(ZeroMemory, ModelStatePerRankMatchesTheStagesFormulas) {
  fs::path d = fresh_dir("formulas");
  write_text(d);
  for (int n : {2, 4}) {
    for (int stage : {0, 1, 2, 3}) {
      SCOPED_TRACE("N " + std::to_string(n) + " stage " + std::to_string(stage));
      std::string name = "s" + std::to_string(stage) + "n" + std::to_string(n);
      CliResult r = run_cli(example(d, name, n, stage));
      ASSERT_EQ(r.status, 0) << r.output;
      const double psi = last_record(d / name / "metrics.jsonl", "start")["parameters"];
      for (int rank = 0; rank < n; ++rank) {
        fs::path f = d / name /
                     (rank == 0 ? std::string("metrics.jsonl")
                                : "metrics.rank" + std::to_string(rank) + ".jsonl");
        nlohmann::json sum = last_record(f, "summary");
        const double held = model_state(sum.at("memory_bytes")) / psi;
        const double per_psi[] = {16, 8 + 8.0 / n, 4 + 12.0 / n, 16.0 / n};
        EXPECT_LE(held, 1.1 * per_psi[stage]) << "rank " << rank << " holds " << held << " Psi";
        if (stage == 3) {
          const double peak = model_state(sum.at("memory_peak_by_kind"));
          const double in_flight = 5.0 * 4 * double(kBlockNumel);
          EXPECT_LE(peak, 1.1 * per_psi[3] * psi + in_flight) << "rank " << rank;
        }
      }
    }
  }
}

// n_embd 768, 12 layers: about 85M parameters, 16 Psi = 1.36 GB of model state under DDP.
TEST(ZeroMemory, AGptThatDdpCannotFitInOneGibPerRankTrainsUnderStageThreeOnFour) {
  fs::path d = fresh_dir("cap");
  write_text(d);
  auto big = [&](const std::string& name, const std::string& strategy) {
    return run_cli("train /dev/null --workers 4 --set parallel.strategy=" + strategy +
                   " --set run.memory_limit_mb=1024 --set model.type=gpt --set model.n_layer=12"
                   " --set model.n_head=12 --set model.n_embd=768 --set model.block_size=16"
                   " --set data.dataset=text --set data.path=" +
                   (d / "text.txt").string() +
                   " --set data.batch_size=1 --set optim.name=adamw --set train.max_steps=2"
                   " --set train.eval_batches=1 --set train.sample_bytes=0"
                   " --set ckpt.enabled=false --set run.threads=1 --set comm.timeout_s=120"
                   " --set run.dir=" +
                   d.string() + " --set run.name=" + name);
  };
  CliResult ddp = big("ddp", "ddp");
  EXPECT_NE(ddp.status, 0) << ddp.output;
  EXPECT_NE(ddp.output.find("memory limit exceeded"), std::string::npos) << ddp.output;
  EXPECT_NE(ddp.output.find("run.memory_limit_mb = 1024"), std::string::npos) << ddp.output;
  CliResult zero = big("zero3", "zero --set zero.stage=3");
  ASSERT_EQ(zero.status, 0) << zero.output;
  nlohmann::json sum = last_record(d / "zero3" / "metrics.jsonl", "summary");
  EXPECT_LE(sum.at("memory_peak_run_bytes").get<double>(), 1024.0 * 1024 * 1024);
  EXPECT_EQ(sum.at("steps").get<int>(), 2);
}
