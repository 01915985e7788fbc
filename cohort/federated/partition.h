#pragma once
// How a federated run splits one dataset among its clients.
//
// Federated learning is judged on non-IID data: each client holds a skewed share of the labels,
// as real devices do. The standard benchmark split (Hsu, Qi, Brown 2019, "Measuring the Effects
// of Non-Identical Data Distribution for Federated Visual Classification"; Flower's
// DirichletPartitioner) draws, for every class, the shares of the K clients from Dir(alpha):
// alpha -> infinity is IID, alpha = 0.1 leaves most clients with one or two classes.
//
// Everything here is a pure function of (labels, options): the same seed gives the same parts on
// every machine (Philox, no std:: distributions whose output differs between libraries), so the
// server and every client can compute the split independently and agree.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/core/rng.h"

namespace cohort::federated {

enum class PartitionKind { kIid, kDirichlet };

struct PartitionOptions {
  PartitionKind kind = PartitionKind::kIid;
  int clients = 10;
  double alpha = 0.5;  // Dirichlet concentration; smaller = more skewed
  uint64_t seed = 0;
  // Every client gets at least this many samples; Dirichlet draws are repeated until it holds.
  int64_t min_samples = 10;
};

// Sample indices of each client; deterministic from the options and labels; every sample is in
// exactly one client's list, and each list is sorted. Throws InvalidArgument naming the config key
// (fl.clients, fl.alpha, fl.min_samples) for bad options, or when the Dirichlet draws keep
// leaving a client below min_samples.
std::vector<std::vector<int64_t>> partition_indices(std::span<const int64_t> labels,
                                                    int num_classes,
                                                    const PartitionOptions& options);

// counts[client][class]: how many samples of each class each client holds.
std::vector<std::vector<int64_t>> label_histogram(std::span<const int64_t> labels, int num_classes,
                                                  const std::vector<std::vector<int64_t>>& parts);

// A readable table, one row per client: client, total, then the count of each class.
std::string format_histogram(const std::vector<std::vector<int64_t>>& counts);
// {"clients": K, "classes": C, "totals": [K], "counts": [[C] x K]}
nlohmann::json histogram_json(const std::vector<std::vector<int64_t>>& counts);

// "iid" | "dirichlet"; anything else is InvalidArgument listing both.
PartitionKind parse_partition_kind(const std::string& name);
std::string partition_kind_name(PartitionKind kind);

// ---- Sampling building blocks (exposed for their statistical tests) ----

// Sequential double-precision draws over Philox: draw n uses counter block n of `stream`, so a
// sequence is fixed by (seed, stream) alone. 53-bit uniforms, because the Gamma sampler's
// U^(1/shape) for small shapes needs more resolution than Philox::uniform's 24 bits.
class PhiloxStream {
 public:
  explicit PhiloxStream(uint64_t seed, uint64_t stream = 0) : philox_(seed), stream_(stream) {}
  double uniform();            // in (0, 1): never 0, so log() is finite
  double normal();             // N(0, 1), Box-Muller
  uint64_t bits64();           // 64 uniformly random bits
  uint64_t below(uint64_t n);  // uniform integer in [0, n), n >= 1

 private:
  Philox philox_;
  uint64_t stream_;
  uint64_t counter_ = 0;
};

// log of a Gamma(shape, 1) draw, by Marsaglia & Tsang (2000), "A simple method for generating
// gamma variables". shape < 1 uses their boost, G(a) = G(a + 1) * U^(1/a), whose value can
// underflow a double (shape 0.01: U^100); the log cannot, which is why the log is returned.
double sample_log_gamma(double shape, PhiloxStream& rng);
double sample_gamma(double shape, PhiloxStream& rng);  // exp(sample_log_gamma)
// A draw from Dir(alpha * 1_k), normalised in log space (robust for tiny alpha).
std::vector<double> sample_dirichlet(double alpha, int k, PhiloxStream& rng);

}  // namespace cohort::federated
