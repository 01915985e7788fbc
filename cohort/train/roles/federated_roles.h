#pragma once
// `cohort fl server` and `cohort fl client`: the federated roles built from a Config. The
// server builds the model (for its layout and initial values, from run.seed) and the test
// split, runs fl.rounds rounds (federated/coordinator.h), evaluates the global model on the
// test split after each, writes a "fl_round" record per round to <run dir>/metrics.jsonl and a
// checkpoint (ckpt/, atomic and verified) to <ckpt dir>/; run.resume = auto continues from the
// newest. A client builds the same model, reads only its own part of the training split
// (federated/partition.h, from fl.partition and run.seed), and trains it locally with optim.*
// and data.batch_size when sampled.
//
// Security: with fl.keys set (a directory from `cohort fl keys`) both sides use TLS with the
// job CA's certificates and the job secret in DIR/secret; without it, the secret comes from
// COHORT_JOB_SECRET and the connection is plain TCP on loopback.
#include <cstdint>
#include <string>

#include "cohort/core/config.h"
#include "cohort/federated/client.h"
#include "cohort/train/trainer.h"

namespace cohort::train {

struct FlServerArgs {
  std::string address_file;  // non-empty: write "host:port" there once listening
};

struct FlServerSummary {
  int64_t rounds = 0;  // rounds completed, resumed ones included
  EvalResult eval;     // the final global model on the test split
  double seconds = 0;
  std::string run_dir;
  double epsilon = -1;  // DP: the final epsilon
};

FlServerSummary run_fl_server(const Config& cfg, const FlServerArgs& args = {});

struct FlClientArgs {
  std::string server;  // "host:port"
  uint32_t id = 0;     // 0..fl.clients-1: which part of the data
};

federated::ClientSummary run_fl_client(const Config& cfg, const FlClientArgs& args);

}  // namespace cohort::train
