// ps.overlap (docs/ps.md, "Overlap with backward") end to end with real processes, on the PS
// e2e tests' small job (ps_job.h: 20 steps, 2 workers of batch 32, 2 servers): BSP with the
// pushes started from backward's grad-ready hooks ends bit-identical to pushing in step(),
// with every server's push started during backward (pushes_in_backward) and push time hidden;
// with gradient accumulation each step pushes once; with optim.clip_grad_norm the worker falls
// back to pushing in step() and still trains exactly like ps.overlap = false.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/ps_job.h"
#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::run_cli;

namespace {

const std::string kPs =
    " --set parallel.strategy=ps --set optim.momentum=0.9 --set optim.weight_decay=0.01"
    " --workers 2 --servers 2";

cohort::NamedTensors final_model(const fs::path& run) {
  return cohort::ckpt::read_safetensors(
      (cohort::testing::newest_checkpoint(run) / "model.safetensors").string());
}

uint64_t model_bytes(const cohort::NamedTensors& m) {
  uint64_t n = 0;
  for (const auto& [name, t] : m) n += t.nbytes();
  return n;
}

nlohmann::json summary(const fs::path& run, int rank) {
  return cohort::testing::last_record(
      run / (rank == 0 ? "metrics.jsonl" : "metrics.rank" + std::to_string(rank) + ".jsonl"),
      "summary");
}

// Runs the job twice, ps.overlap = true and false (each with `extra`), and checks that both end
// with the same bytes in every parameter. Returns the overlapped run's directory.
fs::path overlapped_equals_not(const std::string& name, int batch, const std::string& extra) {
  fs::path d = cohort::testing::fresh_dir("cohort_ps_overlap_", name);
  for (const char* overlap : {"true", "false"}) {
    CliResult r = run_cli(cohort::testing::ps_job(d, overlap, batch) + kPs + extra +
                          " --set ps.overlap=" + overlap);
    EXPECT_EQ(r.status, 0) << r.output;
  }
  const cohort::NamedTensors a = final_model(d / "true"), b = final_model(d / "false");
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>())
        << name << ": " << a[i].first << " differs between ps.overlap = true and false";
  }
  for (int rank : {0, 1}) {  // the run without overlap pushed everything in step()
    const nlohmann::json s = summary(d / "false", rank);
    EXPECT_EQ(s["ps_overlap"], false) << s.dump();
    EXPECT_EQ(s["pushes_in_backward"], 0) << s.dump();
    EXPECT_EQ(s["push_overlap_s"], 0.0) << s.dump();
  }
  return d / "true";
}

// Every worker started both servers' pushes from backward's hooks in each of the 20 steps
// (the model's parameters all get a gradient), once per step, and some round trip time ran
// behind backward.
void expect_overlapped(const fs::path& run) {
  const uint64_t bytes = model_bytes(final_model(run));
  for (int rank : {0, 1}) {
    const nlohmann::json s = summary(run, rank);
    EXPECT_EQ(s["ps_overlap"], true) << s.dump();
    EXPECT_EQ(s["pushes_in_backward"], 20 * 2) << s.dump();
    EXPECT_GT(s["push_overlap_s"].get<double>(), 0) << s.dump();
    EXPECT_EQ(s["push_bytes"].get<uint64_t>(), 20 * bytes) << s.dump();  // once per step
    EXPECT_GT(s["comm_ms"].get<double>(), s["exposed_comm_ms"].get<double>()) << s.dump();
  }
}

TEST(PsOverlap, BspWithPushesFromBackwardEndsBitIdenticalToPushingInStep) {
  expect_overlapped(overlapped_equals_not("bsp", 32, ""));
}

// Two micro-batches of 16: the first backward accumulates (no push), the second pushes.
TEST(PsOverlap, GradientAccumulationPushesOncePerStepFromTheLastMicroBatch) {
  expect_overlapped(overlapped_equals_not("accum", 16, " --set train.grad_accum_steps=2"));
}

// Worker-side clipping needs every gradient before any push: overlap falls back to step().
TEST(PsOverlap, ClippingFallsBackToPushingInStepAndTrainsTheSame) {
  const fs::path run = overlapped_equals_not("clip", 32, " --set optim.clip_grad_norm=0.05");
  for (int rank : {0, 1}) {
    const nlohmann::json s = summary(run, rank);
    EXPECT_EQ(s["ps_overlap"], false) << s.dump();
    EXPECT_EQ(s["pushes_in_backward"], 0) << s.dump();
  }
}

}  // namespace
