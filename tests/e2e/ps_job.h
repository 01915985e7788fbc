#pragma once
// The small job the parameter-server e2e tests run: 1280 synthetic samples, so 20 steps of
// 2 x 32 (two workers) or of 64 (one), logged every 5 steps, in `dir`/`name`.
#include <filesystem>
#include <string>

namespace cohort::testing {

inline std::string ps_job(const std::filesystem::path& dir, const std::string& name, int batch) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=1280"
         " --set data.batch_size=" +
         std::to_string(batch) +
         " --set run.threads=1 --set run.log_every=5 --set run.progress=none"
         " --set comm.timeout_s=30 --set ckpt.async=false --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

}  // namespace cohort::testing
