#pragma once
// CheckpointManager: atomic, verified, optionally asynchronous checkpoints with retention.
//
// On disk, one directory per checkpoint:
//   <dir>/step-0000001000/
//     model.safetensors       CheckpointData::model
//     optimizer.safetensors   CheckpointData::optimizer
//     state.json              CheckpointData::state (the trainer's JSON)
//     <name>.safetensors      CheckpointData::extra[name], if any (per-rank strategy state)
//     MANIFEST.json           {"format":"cohort-checkpoint","version":1,"step":1000,
//                              "files":{"model.safetensors":{"size":N,"sha256":"<hex>"},...}}
//
// Atomic write protocol (save):
//   1. write model.safetensors, optimizer.safetensors, state.json into
//      <dir>/.tmp-step-<N>-<pid>/ and fsync each;
//   2. write MANIFEST.json last (format version, step, size and SHA-256 of each file), fsync
//      it, fsync the temp directory;
//   3. rename the temp directory to step-<N> (an existing step-<N>, from a re-save of the same
//      step after a restart, is removed first), fsync <dir>;
//   4. retention: of the complete checkpoints up to step N, delete the oldest beyond `keep`
//      (one numbered above N is never deleted nor counted), and remove stale
//      .tmp-* directories left by crashed runs (only ones whose pid is not this process and is
//      not alive on this host, so a concurrent writer's temp dir is never pulled away).
// Why this is crash-safe: until the rename in step 3, nothing named step-* changed, so a crash
// leaves exactly the previous checkpoints; after it, step-<N> is complete (its manifest was
// durable before the rename). A torn or bit-rotted file is caught on load by the manifest.
//
// Verification (load): MANIFEST.json parses and has the expected format/version; every file it
// lists exists with the listed size and SHA-256; then both safetensors files parse and validate
// (see safetensors.h) and state.json parses. load_latest() walks checkpoints newest first and
// returns the first that verifies, logging one warning per skipped directory.
//
// Threading: a CheckpointManager is driven by one thread (the training loop). With async, save()
// snapshots the tensors (a bit-exact copy, so training may mutate them at once) and one
// background thread writes; its error travels back to the next save() or wait(). Waiting for it
// has no deadline on purpose: a local write either finishes or fails with an errno, and
// abandoning a thread that is still writing would leave the snapshot with no owner.
#include <cstdint>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cohort/ckpt/safetensors.h"

namespace cohort::ckpt {

struct CheckpointData {
  int64_t step = 0;
  NamedTensors model;      // -> model.safetensors
  NamedTensors optimizer;  // -> optimizer.safetensors
  nlohmann::json state;    // -> state.json (the trainer's: epoch, position, rng, config...)
  // More tensor files, "<name>.safetensors" each, listed and verified like the others. Names:
  // letters, digits, '.', '_', '-' (InvalidArgument otherwise), not "model" or "optimizer".
  std::map<std::string, NamedTensors> extra;
};

struct ManagerOptions {
  std::string dir;    // checkpoints live in <dir>/step-<%010d>/
  int keep = 3;       // newest K up to the saved step kept; older ones deleted after a save; 0: all
  bool async = true;  // save() copies the tensors and returns; a thread writes
};

class CheckpointManager {
 public:
  // Creates `dir` (and its parents); IoError naming it when that fails. InvalidArgument for an
  // empty dir or a negative keep.
  explicit CheckpointManager(ManagerOptions options);
  // Waits for a pending save; an error from it is logged, not thrown.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Writes `data` with the protocol above. Names are checked here (InvalidArgument for empty or
  // duplicate names, a negative step). With async, a previous pending save is waited for first
  // and its error (if any) rethrown here, in which case `data` is not saved; otherwise `data` is
  // snapshotted and written in the background.
  void save(const CheckpointData& data);
  // Waits for a pending save; rethrows its error (IoError naming the path that failed).
  void wait();
  // The newest checkpoint under dir that verifies, or nullopt when none does. Each one skipped is
  // logged as a warning naming its directory and why.
  std::optional<CheckpointData> load_latest() const;
  // Step directories that look complete (have a MANIFEST.json), oldest first, as full paths.
  std::vector<std::string> list() const;
  // Loads and verifies one checkpoint directory; IoError naming the file on any problem.
  static CheckpointData load(const std::string& step_dir);
  const std::string& dir() const { return options_.dir; }

 private:
  void write_now(int64_t step, const NamedTensors& model, const NamedTensors& optimizer,
                 const std::map<std::string, NamedTensors>& extra,
                 const std::string& state_text) const;
  void apply_retention(int64_t saved_step) const;

  ManagerOptions options_;
  std::thread worker_;
  std::exception_ptr error_;  // set by worker_, read after join
};

// "step-0000001000" for 1000.
std::string step_dir_name(int64_t step);

}  // namespace cohort::ckpt
