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

// Times ping-pongs between ranks 0 and 1 (small messages for alpha, 4 MiB for beta) and a
// reduction for gamma, then broadcasts rank 0's figures and installs them on `comm`.
// Collective; a few milliseconds. With one rank, returns the current model unchanged.
CostModel measure_cost_model(Communicator& comm);

}  // namespace cohort::comm
