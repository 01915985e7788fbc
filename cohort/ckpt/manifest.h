#pragma once
// Internal to ckpt/: names and helpers shared by the writer (checkpoint.cc) and the verifier
// (checkpoint_load.cc). See checkpoint.h for the protocol these implement.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cohort/tensor/tensor.h"

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

// Sharded checkpoints (sharded.h), shared by the writer (sharded.cc) and the reader
// (sharded_view.cc).
// "<section>/<name>@<begin>": a piece's tensor name in its shard file.
std::string piece_key(const std::string& section, const std::string& name, int64_t begin);
// "shard-<r>-of-<N>.safetensors": the file name of rank r's pieces (sharded.h shard_file_name
// plus the tensor file suffix).
std::string shard_file(int rank, int world);
// The rank and world of an extra file named "shard-<r>-of-<N>" (digits), else nullopt.
std::optional<std::pair<int, int>> parse_shard_file_name(const std::string& name);
// A "shape" array of non-negative sizes whose non-zero product fits in int64 (even for an empty
// tensor: its strides are that product); *numel gets the element count. IoError prefixed with
// `where` otherwise. Shared by the safetensors reader and the shard index.
Shape parse_shape(const std::string& where, const nlohmann::json& v, uint64_t* numel);
// "model" and "optimizer", the sections a piece may belong to.
bool is_section(const std::string& section);

}  // namespace cohort::ckpt::internal
