// What a user sees when a `cohort` command line is wrong, and the launcher flags a torchrun user
// types: the real binary (COHORT_BIN) in a real process, its exit status and its output.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/e2e/run_cli.h"

namespace {

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::run_cli;
using cohort::testing::run_shell;

void expect_contains(const CliResult& r, const std::string& what) {
  EXPECT_NE(r.output.find(what), std::string::npos) << "missing '" << what << "' in:\n" << r.output;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("cohort_usage_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A few steps on synthetic data, written under `dir`: the cheapest real training run.
std::string tiny_run(const fs::path& dir) {
  return " --set data.dataset=synthetic --set data.synthetic_samples=256 --set train.max_steps=2"
         " --set train.eval_batches=1 --set ckpt.enabled=false --set run.progress=none"
         " --set run.name=tiny --set run.dir=" +
         dir.string();
}

TEST(CliUsage, AValueOutOfRangeIsAUsageErrorNamingTheFlag) {
  CliResult r = run_cli("train /dev/null --workers 0");
  EXPECT_EQ(r.status, 2) << r.output;  // CLI11's own code for it is 105
  expect_contains(r, "cohort: error: --workers: Value 0 not in range 1 to 1024");
  EXPECT_EQ(run_cli("train").status, 2);  // the config is missing
  r = run_cli("train /dev/null --workers 3:2");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "cohort: error: --workers: MIN:MAX needs MIN <= MAX, got 3:2");
  r = run_cli("train /dev/null --workers 2:x");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "--workers: expected N or MIN:MAX (e.g. 4, or 2:4), got 'x'");
  r = run_cli("run --nnodes 3:2 --node-rank 0 --master 127.0.0.1:29500 -- true");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "cohort: error: --nnodes: MIN:MAX needs MIN <= MAX, got 3:2");
  r = run_cli("run -n 1 --respawn -- true");  // a job that is not elastic has nobody to rejoin
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "cohort run: --respawn needs an elastic job: --nnodes MIN:MAX");
  EXPECT_EQ(run_cli("train /dev/null --set").status, 2);  // --set without its value
  EXPECT_EQ(run_cli("train --help").status, 0);           // help is not an error
  EXPECT_EQ(run_cli("--version").status, 0);
}

TEST(CliUsage, AMistypedCommandGetsADidYouMean) {
  CliResult r = run_cli("trian examples/fashion_mlp.toml");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "'trian' is not a command of `cohort` (did you mean 'train'?)");
  expect_contains(r, "the commands are: train, config, bench, run, report, dashboard, ckpt, fl");
  r = run_cli("ckpt insepct runs/x");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "'insepct' is not a command of `cohort ckpt` (did you mean 'inspect'?)");
  r = run_cli("frobnicate");  // nothing close: no guess, the list
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
  expect_contains(r, "the commands are:");
}

TEST(CliUsage, AMistypedFlagGetsADidYouMean) {
  CliResult r = run_cli("train /dev/null --worker 2");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "unknown option '--worker' for `cohort train` (did you mean '--workers'?)");
  expect_contains(r, "Run `cohort train --help` for the options.");
  r = run_cli("run --max-restart=1 -- true");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r,
                  "unknown option '--max-restart' for `cohort run` (did you mean "
                  "'--max-restarts'?)");
}

// Before the check, each worker found the strategy unknown after start-up and printed every
// strategy's description, and the launcher repeated it: three 900-character lines.
TEST(CliUsage, AnUnknownStrategyIsRefusedOnceBeforeAnyWorkerStarts) {
  const fs::path dir = fresh_dir("strategy");
  const auto start = std::chrono::steady_clock::now();
  CliResult r = run_cli("train /dev/null --workers 2 --set parallel.strategy=dpp" + tiny_run(dir));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 2) << r.output;
  const std::string error =
      "cohort: error: config: parallel.strategy = \"dpp\" is not a strategy (did you mean "
      "\"ddp\"?); choose one of: ddp, gossip, local_sgd, model_parallel, none, ps, zero\n";
  EXPECT_EQ(count(r.output, error), 1u) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;           // no worker printed
  EXPECT_EQ(r.output.find("workers, store"), std::string::npos) << r.output;  // none launched
  EXPECT_LT(seconds, 10.0);
  // One process: the same line, not the registry's list of descriptions.
  r = run_cli("train /dev/null --set parallel.strategy=dpp" + tiny_run(dir));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_EQ(count(r.output, error), 1u) << r.output;
}

TEST(CliUsage, AMeshThatDoesNotFitTheWorkersIsRefusedBeforeLaunch) {
  const fs::path dir = fresh_dir("mesh");
  CliResult r = run_cli("train /dev/null --workers 2 --set parallel.dp=3" + tiny_run(dir));
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "parallel.dp");
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;
}

TEST(CliUsage, TrainTakesTorchrunsFlagNames) {
  const fs::path dir = fresh_dir("torchrun_flags");
  const int port = cohort::testing::free_loopback_port();
  CliResult r =
      run_cli("train /dev/null --nproc_per_node 2 --master_addr 127.0.0.1 --master-port " +
              std::to_string(port) + tiny_run(dir));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_contains(r, "cohort run: 2 workers, store 127.0.0.1:" + std::to_string(port));
  expect_contains(r, "2 workers (native)");  // rank 0's banner: both joined
  r = run_cli("train /dev/null --master 127.0.0.1:1 --master-port 2");
  EXPECT_EQ(r.status, 2) << r.output;  // one address, given twice
  expect_contains(r, "--master excludes --master-port");
  r = run_cli("train /dev/null --master 127.0.0.1:29500");
  EXPECT_EQ(r.status, 2) << r.output;
  expect_contains(r, "--master needs --workers N");
}

// Under mpirun or srun the workers of a host share its cores like under cohort's launcher: the
// start record's thread count divides the cores by the launcher's local size.
TEST(CliUsage, DefaultThreadsFollowMpiAndSlurmLocalSizes) {
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int expected = std::max(1, cores / 2);
  for (const char* env : {"OMPI_COMM_WORLD_LOCAL_SIZE=2", "MPI_LOCALNRANKS=2",
                          "SLURM_STEP_TASKS_PER_NODE='2(x3)' SLURM_NODEID=1"}) {
    const fs::path dir = fresh_dir("threads");
    CliResult r = run_shell(std::string("env -u COHORT_NUM_THREADS ") + env +
                            " " COHORT_BIN " train /dev/null" + tiny_run(dir));
    ASSERT_EQ(r.status, 0) << env << "\n" << r.output;
    std::ifstream in(dir / "tiny" / "metrics.jsonl");
    int threads = -1;
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("event", "") == "start") threads = j.value("threads", -1);
    }
    EXPECT_EQ(threads, expected) << env;
  }
}

}  // namespace
