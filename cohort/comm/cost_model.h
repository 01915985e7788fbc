#pragma once
// The alpha-beta(-gamma) cost model that Algorithm::kAuto uses to pick an allreduce algorithm.
//
//   alpha  fixed cost of one message step (latency), microseconds
//   beta   cost per byte moved over the link, microseconds per byte (1 / bandwidth)
//   gamma  cost per byte reduced, microseconds per byte
//
// For n ranks, p the largest power of two <= n, N bytes:
//   ring                2(n-1) alpha + 2(n-1)/n N beta + (n-1)/n N gamma
//   recursive doubling  log2(p) (alpha + N beta + N gamma)             + fold
//   halving-doubling    2 log2(p) alpha + 2(p-1)/p N beta + (p-1)/p N gamma + fold
//   fold (n != p)       2 alpha + 2 N beta + N gamma  (extra ranks hand in and get back)
//
// Every rank must pick the same algorithm, so the model must be identical on every rank: the
// defaults depend only on the transports in use, and measure_cost_model() measures on ranks 0
// and 1 and broadcasts the result.
#include <cstddef>
#include <string>

#include "cohort/comm/algorithms/exec.h"

namespace cohort::comm {

class Communicator;

struct CostModel {
  double alpha_us = 2.0;
  double beta_us_per_byte = 1.0 / 5e3;    // 5 GB/s
  double gamma_us_per_byte = 1.0 / 10e3;  // 10 GB/s

  // Defaults for a communicator whose slowest link is shared memory or TCP.
  static CostModel shared_memory() { return {2.0, 1.0 / 5e3, 1.0 / 10e3}; }
  static CostModel tcp() { return {30.0, 1.0 / 1.5e3, 1.0 / 10e3}; }

  // Predicted time in microseconds (the formulas above).
  double allreduce_us(Algorithm algorithm, int n, size_t bytes) const;
  // The cheapest of ring, recursive doubling and halving-doubling; the ring unless another is
  // at least 10% cheaper.
  Algorithm best_allreduce(int n, size_t bytes) const;
  std::string describe() const;  // "alpha 2.0 us, beta 5.00 GB/s, gamma 10.00 GB/s"
};

// How long measure_cost_model() measures. The defaults take a few milliseconds over shared
// memory; tests use fewer, smaller round trips.
struct MeasureOptions {
  int latency_iters = 200;                   // 8-byte ping-pongs for alpha (after 20 warm-ups)
  size_t bandwidth_bytes = size_t{4} << 20;  // message size for beta (and the reduction, gamma)
  int bandwidth_iters = 4;                   // round trips of that size
};

// Times ping-pongs between ranks 0 and 1 (small messages for alpha, 4 MiB for beta) and a
// reduction for gamma, then broadcasts rank 0's figures and installs them on `comm`.
// Collective; a few milliseconds. With one rank, returns the current model unchanged.
CostModel measure_cost_model(Communicator& comm, const MeasureOptions& options = {});

// --- Calibration at start-up: measure once per machine and world, then reuse ---------------
//
// The cache is a JSON file of entries keyed by what the figures depend on:
//   {"version": 1, "entries": {"n=4 transports=shm:12 hosts=1 host: [0 1 2 3] on node7":
//       {"alpha_us": 2.1, "beta_us_per_byte": 0.0002, "gamma_us_per_byte": 0.0001}}}
// The key is the world size, the transport mix (directed pairs per transport, summed over all
// ranks) and the host topology with rank 0's host name; another world size or layout gets its
// own entry beside the others. Only rank 0 reads and writes the file; it decides whether a
// valid entry exists and broadcasts the figures (or "measure"), so every rank installs the
// same model. Writes go to a temporary file in the same directory, then rename(): a reader
// never sees half a file (two jobs writing at once: the last rename wins, losing the other's
// new entry, which is then measured again next time). A file that does not parse, or an entry
// whose figures are not finite and positive, is ignored with a warning naming the file, and
// rewritten after measuring.
//
// Default location (the caller passes it; the library reads no environment):
// ~/.cache/cohort/cost_model.json, see default_cost_model_cache().
struct CalibrationOptions {
  std::string cache_path;  // empty: no cache (always measure, write nothing)
  // Measure even when the cache has a valid entry, then overwrite the entry (config
  // comm.calibrate = "always").
  bool force_measure = false;
  MeasureOptions measure;
};

// What calibrate_cost_model() did, for logs and tests. Identical on every rank except
// `warning`, which only rank 0 (the one that reads the file) may set.
struct CalibrationInfo {
  bool measured = false;  // false: loaded from the cache (or one rank: nothing to measure)
  std::string key;        // the cache entry's key
  std::string warning;    // non-empty: the cache could not be read or written (also logged)
};

// Loads alpha/beta/gamma for this (world size, transport mix, host topology) from
// o.cache_path if a valid entry exists, else measures (measure_cost_model) and writes the
// entry. Installs the model on `comm` and returns it. Collective over every rank of `comm`;
// with one rank, returns the current model and touches no file.
CostModel calibrate_cost_model(Communicator& comm, const CalibrationOptions& o,
                               CalibrationInfo* info = nullptr);

// "<home>/.cache/cohort/cost_model.json": where the trainer keeps the cache unless
// comm.cost_model_cache names another file. `home` is $HOME, read by the caller.
std::string default_cost_model_cache(const std::string& home);

}  // namespace cohort::comm
