// The strategy seam (parallel/strategy.h) and gradient accumulation through the trainer:
// in-process Trainers for numerics, the real CLI for multi-worker runs and errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cohort/parallel/strategy_registry.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/trainer.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;

namespace cohort {
namespace {

using testing::CliResult;
using testing::run_cli;

fs::path fresh_dir(const std::string& name) {
  return testing::fresh_dir("cohort_strategy_", name);
}

// Synthetic data, the default MLP, plain SGD (no momentum), one thread, no checkpoints.
std::vector<std::string> small_job(const fs::path& dir, int64_t batch, int64_t accum) {
  return {"data.dataset=synthetic",
          "data.synthetic_samples=512",
          "data.batch_size=" + std::to_string(batch),
          "train.grad_accum_steps=" + std::to_string(accum),
          "optim.momentum=0",
          "run.threads=1",
          "run.progress=none",
          "ckpt.enabled=false",
          "run.dir=" + dir.string()};
}

std::vector<float> trained_params(const std::vector<std::string>& overrides, int64_t* steps) {
  train::Trainer t(train::load_config("/dev/null", overrides));
  *steps = t.run().steps;
  std::vector<float> out;
  for (const auto& [name, p] : t.model().named_parameters()) {
    auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Two micro-batches of 32 per step train like one batch of 64: the same samples (the data
// order does not depend on the batch size) and the mean of their gradients.
TEST(GradAccum, TwoMicroBatchesOf32MatchOneBatchOf64) {
  fs::path d = fresh_dir("accum");
  int64_t steps_a = 0, steps_b = 0;
  auto a = trained_params(small_job(d, 64, 1), &steps_a);
  auto b = trained_params(small_job(d, 32, 2), &steps_b);
  EXPECT_EQ(steps_a, 8);  // 512 / 64
  EXPECT_EQ(steps_b, 8);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(a[i])));
  }
  EXPECT_LE(diff / scale, 1e-5);
}

// An epoch whose batch count is not a multiple of the accumulation ends with a shorter step.
TEST(GradAccum, AShortLastStepEndsTheEpoch) {
  fs::path d = fresh_dir("short");
  int64_t steps = 0;
  trained_params(small_job(d, 64, 3), &steps);  // 8 batches: 3 + 3 + 2
  EXPECT_EQ(steps, 3);
}

nlohmann::json summary(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

std::string cli_job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=1024"
         " --set data.batch_size=32 --set run.threads=1 --set run.progress=none"
         " --set ckpt.enabled=false --set comm.timeout_s=30 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// With DDP the micro-batches before the last do not communicate: half the steps, half the
// bytes of the same data without accumulation.
TEST(GradAccum, DdpCommunicatesOncePerStep) {
  fs::path d = fresh_dir("ddp_accum");
  CliResult one = run_cli(cli_job(d, "one") + " --workers 2");
  ASSERT_EQ(one.status, 0) << one.output;
  CliResult two = run_cli(cli_job(d, "two") + " --workers 2 --set train.grad_accum_steps=2");
  ASSERT_EQ(two.status, 0) << two.output;
  nlohmann::json a = summary(d / "one" / "metrics.jsonl"), b = summary(d / "two" / "metrics.jsonl");
  EXPECT_EQ(a["steps"], 16);  // 1024 samples / 2 workers / 32
  EXPECT_EQ(b["steps"], 8);
  double bytes_a = a["bytes_sent"].get<double>(), bytes_b = b["bytes_sent"].get<double>();
  EXPECT_NEAR(bytes_b / bytes_a, 0.5, 0.05) << bytes_a << " vs " << bytes_b;
}

// A step means k micro-batches: another k is another global batch, whose steps must start
// where the checkpoint's samples end (64 after 2 steps of 32): 3 x 32 does not, and the error
// says so.
TEST(GradAccum, ResumingWithAnAccumulationThatDoesNotConvertIsRefused) {
  fs::path d = fresh_dir("accum_resume");
  std::string job =
      "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=256"
      " --set data.batch_size=32 --set run.threads=1 --set run.progress=none"
      " --set ckpt.every_steps=2 --set run.dir=" +
      d.string() + " --set run.name=r";
  CliResult first = run_cli(job + " --set train.max_steps=2");
  ASSERT_EQ(first.status, 0) << first.output;
  CliResult again = run_cli(job + " --set train.grad_accum_steps=3 --resume auto");
  EXPECT_EQ(again.status, 2) << again.output;
  EXPECT_NE(again.output.find("this run's global batch is 96 (data.batch_size 32 x 1 worker(s) "
                              "x train.grad_accum_steps 3)"),
            std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("choose data.batch_size x workers x train.grad_accum_steps = 32"),
            std::string::npos)
      << again.output;
}

TEST(StrategySeam, UnknownStrategyNamesTheRegisteredOnes) {
  fs::path d = fresh_dir("unknown");
  CliResult r = run_cli(cli_job(d, "x") + " --set parallel.strategy=zero9");
  EXPECT_EQ(r.status, 2) << r.output;
  // Checked before any worker starts (tools/cohort/train_preflight.cc), one short line.
  EXPECT_NE(r.output.find("parallel.strategy = \"zero9\" is not a strategy (did you mean "
                          "\"zero\"?); choose one of: ddp, "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(", none, "), std::string::npos) << r.output;
}

TEST(StrategySeam, NoneWithSeveralWorkersIsRefusedOnEveryRank) {
  fs::path d = fresh_dir("none2");
  CliResult r = run_cli(cli_job(d, "x") + " --workers 2 --set parallel.strategy=none");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("'none' trains a single process, but this job has 2 workers"),
            std::string::npos)
      << r.output;
}

TEST(StrategySeam, RegistrationErrorsAreClear) {
  auto registered = parallel::strategy_names();
  EXPECT_NE(std::find(registered.begin(), registered.end(), "ddp"), registered.end());
  try {
    parallel::register_strategy({.name = "ddp", .make = [](const parallel::StrategyContext&) {
                                   return std::unique_ptr<parallel::Strategy>();
                                 }});
    FAIL() << "registering 'ddp' twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'ddp' is already registered"), std::string::npos);
  }
  // The trainer's registry is built by now (the tests above read configs): too late for keys.
  train::train_registry();
  try {
    parallel::register_strategy({.name = "late", .make = [](const parallel::StrategyContext&) {
                                   return std::unique_ptr<parallel::Strategy>();
                                 }});
    FAIL() << "a registration after the config keys were declared was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("before reading any config"), std::string::npos);
  }
}

std::vector<nlohmann::json> records(const fs::path& metrics, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == event) out.push_back(j);
  }
  return out;
}

// examples/local_sgd_strategy.cpp registers a strategy and is the whole CLI: the strategy
// trains with --workers 2, communicates only every `period` steps, declares its own key and
// has its state in the checkpoint. The plain cohort binary does not know it.
TEST(StrategySeam, AStrategyFromAnotherProgramTrainsThroughTheCli) {
  fs::path d = fresh_dir("local_sgd");
  std::string job = cli_job(d, "lsgd") +
                    " --workers 2 --set run.log_every=1 --set parallel.strategy=local_sgd_example";
  auto local_sgd = [](const std::string& args) {
    return testing::run_shell(std::string(LOCAL_SGD_BIN) + " " + args);
  };
  CliResult r = local_sgd(job + " --set local_sgd_example.period=4 --set ckpt.enabled=true");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
    auto steps = records(d / "lsgd" / f, "step");
    ASSERT_EQ(steps.size(), 16u) << f;
    for (const auto& s : steps) {
      bool averaged = s["step"].get<int64_t>() % 4 == 0;
      EXPECT_EQ(s["bytes_sent"].get<double>() > 0, averaged) << f << " step " << s["step"];
    }
    EXPECT_LT(steps.back()["loss"].get<double>(), steps.front()["loss"].get<double>()) << f;
  }
  std::ifstream state(d / "lsgd" / "checkpoints" / "step-0000000016" / "state.json");
  ASSERT_TRUE(state.good());
  nlohmann::json st = nlohmann::json::parse(state);
  EXPECT_EQ(st["strategy"]["name"], "local_sgd_example");
  EXPECT_EQ(st["strategy"]["values"]["steps"], 16);

  CliResult typo = local_sgd(job + " --set local_sgd_example.perod=4");
  EXPECT_EQ(typo.status, 2) << typo.output;
  EXPECT_NE(typo.output.find("local_sgd_example.period"), std::string::npos) << typo.output;
  CliResult plain = run_cli(job);
  EXPECT_EQ(plain.status, 2) << plain.output;
  EXPECT_NE(plain.output.find("parallel.strategy = \"local_sgd_example\" is not a strategy"),
            std::string::npos)
      << plain.output;
}

}  // namespace
}  // namespace cohort
