#pragma once
// CHOCO-Gossip (Koloskova, Stich, Jaggi, "Decentralized Stochastic Optimization and Gossip
// Algorithms with Compressed Communication", ICML 2019): the compressed averaging step of
// gossip SGD (gossip_strategy.h, gossip.compression). No network here: the strategy moves the
// messages; this keeps the copies and does the arithmetic, so it is testable with workers
// simulated in one process.
//
// Each worker i keeps x_hat_i, its public copy (what its neighbours know of x_i), and x_hat_j
// for each neighbour j, rebuilt from j's messages. One round:
//   q_i = Q(x_i - x_hat_i)                              encode(): sent to every neighbour
//   x_hat_i += q_i; x_hat_j += q_j for each neighbour   update(): after the messages arrive
//   x_i += gamma * w * sum_j (x_hat_j - x_hat_i)        pull(): w the graph's uniform weight
// Only the compressed difference travels, and since x - x_hat shrinks as the copies catch up,
// the compression error shrinks with it: no error-feedback residual is needed (the codec runs
// without one). With a symmetric graph the pull sums to zero over workers, so the average of
// the x_i is kept exactly (up to float rounding) and the x_i converge to it.
//
// Every worker must hold the same x_hat_j as worker j itself does; reset() to the common
// starting parameters (or zeros, the paper's start) on every worker keeps that true.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cohort/compress/compressor.h"

namespace cohort::parallel {

struct ChocoOptions {
  compress::CompressorOptions codec;  // method: anything but kNone
  double gamma = 0.5;                 // the consensus step size, in (0, 1]
};

// gossip.consensus_step = 0 ("auto"): a gamma that keeps CHOCO-Gossip stable with this codec.
// The sparse codecs' stable range shrinks with their ratio; measured with workers simulated on
// rings of 4 to 32 (tests/parallel/choco_gossip_test.cc, docs/decentralized.md): fp16, bf16:
// 1 (the message is nearly exact; CHOCO is then D-PSGD); topk: 2 * ratio, at most 0.3 (10%
// diverged at 0.4 on rings of 4 and 8); randomk: ratio / 2 (10% diverged at 0.2, 1% at 0.02);
// qsgd: 0.3 (16 levels diverged at 1, converged at 0.5); signsgd: 0.5.
double default_consensus_step(const compress::CompressorOptions& codec);

class ChocoGossip {
 public:
  // InvalidArgument (naming gossip.consensus_step) for gamma outside (0, 1]; the codec's own
  // errors for a bad method or ratio.
  ChocoGossip(const ChocoOptions& options, size_t numel, size_t neighbours);

  // Every copy (own and neighbours') := x; x empty: zeros.
  void reset(std::span<const float> x);
  // q = Q(x - x_hat_self) for this round (the same on every worker); returns the message.
  std::span<const uint8_t> encode(std::span<const float> x, uint64_t round);
  // Where neighbour k's message of this round is received.
  std::span<uint8_t> inbox(size_t k) { return inbox_[k]; }
  // x_hat_self += q_self, x_hat_k += q_k: once every message of the round arrived.
  void update(uint64_t round);
  // x[i] += gamma * w * sum_k (x_hat_k - x_hat_self)[at + i]: one parameter of the flat vector.
  void pull(std::span<float> x, size_t at, double w) const;

  compress::Method method() const { return codec_->method(); }
  double gamma() const { return gamma_; }
  size_t message_bytes() const { return outbox_.size(); }
  size_t numel() const { return self_.size(); }
  std::vector<float>& self() { return self_; }
  std::vector<float>& peer(size_t k) { return peers_[k]; }
  const std::vector<float>& self() const { return self_; }
  const std::vector<float>& peer(size_t k) const { return peers_[k]; }

 private:
  std::unique_ptr<compress::Compressor> codec_;
  double gamma_;
  std::vector<float> self_;                // x_hat_i
  std::vector<std::vector<float>> peers_;  // x_hat_j, in the order of the neighbours
  std::vector<float> diff_;                // x - x_hat_i, encode's input
  std::vector<uint8_t> outbox_;
  std::vector<std::vector<uint8_t>> inbox_;
};

}  // namespace cohort::parallel
