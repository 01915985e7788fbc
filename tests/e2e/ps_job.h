#pragma once
// The small job the parameter-server e2e tests run: 1280 synthetic samples, so 20 steps of
// 2 x 32 (two workers) or of 64 (one), logged every 5 steps, in `dir`/`name`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cohort/ckpt/safetensors.h"
#include "tests/e2e/run_dirs.h"

namespace cohort::testing {

inline std::string ps_job(const std::filesystem::path& dir, const std::string& name, int batch) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=1280"
         " --set data.batch_size=" +
         std::to_string(batch) +
         " --set run.threads=1 --set run.log_every=5 --set run.progress=none"
         " --set comm.timeout_s=30 --set ckpt.async=false --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// The model of a run's newest checkpoint (rank 0's, written at the end).
inline NamedTensors ps_final_model(const std::filesystem::path& run) {
  return ckpt::read_safetensors((newest_checkpoint(run) / "model.safetensors").string());
}

// Bit for bit, every parameter.
inline void expect_same_weights(const NamedTensors& a, const NamedTensors& b,
                                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>())
        << what << ": " << a[i].first;
  }
}

}  // namespace cohort::testing
