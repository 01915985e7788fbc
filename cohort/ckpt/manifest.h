#pragma once
// Internal to ckpt/: names and helpers shared by the writer (checkpoint.cc) and the verifier
// (checkpoint_load.cc). See checkpoint.h for the protocol these implement.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::ckpt::internal {

inline constexpr const char* kManifest = "MANIFEST.json";
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kStateFile = "state.json";
inline constexpr const char* kFormat = "cohort-checkpoint";
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kTmpPrefix = ".tmp-";
inline constexpr const char* kTensorFileSuffix = ".safetensors";

// The step N of a directory named "step-<digits>", else nullopt.
std::optional<int64_t> parse_step_dir(const std::string& name);

struct StepDir {
  int64_t step;
  std::string path;
};
// Every step-<N> directory directly under `dir` (complete or not), oldest first; empty when
// `dir` does not exist.
std::vector<StepDir> scan_step_dirs(const std::string& dir);

}  // namespace cohort::ckpt::internal
