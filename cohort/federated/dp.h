#pragma once
// Differential privacy for federated averaging: DP-FedAvg (McMahan, Ramage, Talwar, Zhang,
// "Learning Differentially Private Recurrent Language Models", ICLR 2018).
//
// Each round the server samples clients with probability q; each sampled client's update is
// clipped to L2 norm <= S (clip_l2) so that one user moves the sum by at most S; the server adds
// N(0, (z S)^2) to the sum (add_gaussian_noise with stddev z * S) before dividing. One round is
// then the sampled Gaussian mechanism with noise multiplier z, and RdpAccountant (in
// rdp_accountant.h) turns (q, z, rounds, delta) into the (epsilon, delta) the run can claim.
#include <cstdint>
#include <span>

#include "cohort/federated/rdp_accountant.h"

namespace cohort::federated {

// Scales v to L2 norm <= clip (clip > 0) and returns the norm before clipping (computed in
// double: a float sum over millions of parameters loses the digits the bound relies on).
double clip_l2(std::span<float> v, double clip);

// Adds N(0, stddev^2) noise to every element, deterministic from (seed, stream) via Philox: a
// server resumed from a checkpoint draws the very same noise for the same round (pass the round
// as the stream), and no two rounds share noise. Element i uses Philox block (i / 2, stream),
// Box-Muller over two 53-bit uniforms, so the noise does not depend on thread count or chunking.
// Double-precision uniforms matter here: float ones (24 bits) cut the tails at 5.8 sigma.
void add_gaussian_noise(std::span<float> v, double stddev, uint64_t seed, uint64_t stream);

}  // namespace cohort::federated
