#pragma once
// The gossip end-to-end tests' shared job: `cohort train` on the synthetic task with
// parallel.strategy = gossip (2 epochs, batch 32, one thread per worker), and what they read
// back from it.
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace cohort::testing {

inline std::string gossip_job(const std::filesystem::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=4096"
         " --set data.batch_size=32 --set train.epochs=2 --set run.threads=1"
         " --set run.log_every=4 --set run.progress=none --set comm.timeout_s=30"
         " --set ckpt.enabled=false --set parallel.strategy=gossip --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// consensus_distance of every step record that has one, in order.
inline std::vector<double> consensus(const std::filesystem::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("event", "") == "step" && j.contains("consensus_distance"))
      out.push_back(j["consensus_distance"].get<double>());
  }
  return out;
}

// Runs `job_of(name) + ckpt` uninterrupted ("full"), then killed (rank 0, after step
// `kill_at`) and resumed ("crash"): the resume starts at `resumed_from`, and the newest
// checkpoints of both runs hold the same model and per-rank strategy files, byte for byte.
// Returns the two checkpoint directories.
inline std::pair<std::filesystem::path, std::filesystem::path> expect_killed_run_resumes_exactly(
    const std::function<std::string(const std::string&)>& job_of, const std::filesystem::path& d,
    const std::string& ckpt, int kill_at, int resumed_from) {
  CliResult full = run_cli(job_of("full") + ckpt);
  EXPECT_EQ(full.status, 0) << full.output;
  CliResult crash = run_cli(job_of("crash") + ckpt + " --set fault.kill_rank=0" +
                            " --set fault.kill_at_step=" + std::to_string(kill_at));
  EXPECT_EQ(crash.status, 128 + 9) << crash.output;
  CliResult resumed = run_cli(job_of("crash") + ckpt + " --resume auto");
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed, "resumed from step " + std::to_string(resumed_from)))
      << resumed.output;
  const std::filesystem::path a = newest_checkpoint(d / "full");
  const std::filesystem::path b = newest_checkpoint(d / "crash");
  EXPECT_EQ(a.filename(), b.filename());
  for (const char* f :
       {"model.safetensors", "strategy.rank0.safetensors", "strategy.rank1.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(a / f) && std::filesystem::exists(b / f)) << f;
    // Not EXPECT_EQ: its message would print megabytes of tensors.
    EXPECT_TRUE(read_bytes(a / f) == read_bytes(b / f)) << f;
  }
  return {a, b};
}

}  // namespace cohort::testing
