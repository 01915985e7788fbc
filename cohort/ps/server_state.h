#pragma once
// What a parameter server checkpoints (server.h, "Recovery"), and its conversion to and from
// cohort/ckpt's format: model.safetensors holds the shard ("shard"), optimizer.safetensors the
// optimizer's slots over it, state.json the bookkeeping below. The checkpoint's step is the
// server's save count (`sequence`): it only grows, even when a save repeats a version (a
// worker's bye with no update since), so a re-save never replaces a durable directory.
#include <cstdint>
#include <string>
#include <vector>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/optim/optimizer.h"
#include "cohort/ps/partition.h"

namespace cohort::ps {

struct ServerSnapshot {
  // The job's shape: a checkpoint of another one is refused on load.
  int index = 0;
  int num_servers = 0;
  int num_workers = 0;
  KeyRange range;
  // Progress.
  int64_t step = 0;                   // BSP: the step being gathered
  int64_t version = 0;                // updates applied
  std::vector<int64_t> clocks;        // per worker: its pushes applied (ASP/SSP's next step)
  std::vector<int64_t> sent_version;  // per worker: version of the values it last received
  std::vector<int> said_bye;          // workers that finished
  Tensor shard;                       // 1-D f32 [range.size()]
  optim::OptimizerState optimizer;
};

ckpt::CheckpointData to_checkpoint(const ServerSnapshot& s, int64_t sequence);
// The snapshot in `d`, checked against the server that loads it (`expect`'s shape fields):
// InvalidArgument naming the checkpoint step and the field when it belongs to another server
// or job shape; IoError for a state.json that lacks a field.
ServerSnapshot from_checkpoint(const ckpt::CheckpointData& d, const ServerSnapshot& expect);

// A server checkpoint that verifies, as a restoring server lists them.
struct SavedCheckpoint {
  std::string dir;
  int64_t number = 0;    // its directory's number (the server's saves so far)
  int64_t progress = 0;  // the server's step in it (BSP: its step; ASP/SSP: updates / workers)
};

}  // namespace cohort::ps
