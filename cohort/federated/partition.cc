#include "cohort/federated/partition.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>

#include "cohort/core/error.h"

namespace cohort::federated {
namespace {

// Dirichlet draws that leave a client under min_samples are redrawn; a cap keeps an impossible
// request (alpha tiny, many clients) from spinning forever. 1000 draws cost well under a second
// at Fashion-MNIST scale, and a request that fails that many times is not worth waiting for.
constexpr int kMaxDirichletAttempts = 1000;

void shuffle(std::vector<int64_t>& v, PhiloxStream& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[size_t(rng.below(i))]);
  }
}

void validate(std::span<const int64_t> labels, int num_classes, const PartitionOptions& o) {
  const int64_t n = int64_t(labels.size());
  COHORT_CHECK_ARG(o.clients >= 1, "fl.clients must be at least 1, got ", o.clients);
  COHORT_CHECK_ARG(o.min_samples >= 0, "fl.min_samples must be >= 0, got ", o.min_samples);
  COHORT_CHECK_ARG(int64_t(o.clients) * o.min_samples <= n, "fl.clients (", o.clients,
                   ") * fl.min_samples (", o.min_samples, ") exceeds the ", n,
                   " samples to partition; lower one of them");
  if (o.kind == PartitionKind::kDirichlet) {
    COHORT_CHECK_ARG(o.alpha > 0 && std::isfinite(o.alpha),
                     "fl.alpha must be a finite number > 0, got ", o.alpha);
  }
  COHORT_CHECK_ARG(num_classes >= 1, "partition: num_classes must be >= 1, got ", num_classes);
  for (size_t i = 0; i < labels.size(); ++i) {
    COHORT_CHECK_ARG(labels[i] >= 0 && labels[i] < num_classes, "partition: label ", labels[i],
                     " of sample ", i, " is outside [0, ", num_classes, ")");
  }
}

// A seeded permutation cut into K near-equal runs: sizes floor(N/K) or ceil(N/K).
std::vector<std::vector<int64_t>> partition_iid(int64_t n, const PartitionOptions& o) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  PhiloxStream rng(derive_seed(o.seed, "fl.partition.iid"));
  shuffle(perm, rng);
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(o.clients));
  for (int c = 0; c < o.clients; ++c) {
    int64_t begin = n * c / o.clients, end = n * (c + 1) / o.clients;
    parts[size_t(c)].assign(perm.begin() + begin, perm.begin() + end);
  }
  return parts;
}

// Cut points of one class's n samples among K clients for shares p: client j gets
// [cut[j], cut[j+1]). floor(cumsum * n), as Hsu et al. and Flower (np.split on the cumsum).
std::vector<int64_t> cuts_for(const std::vector<double>& p, int64_t n) {
  std::vector<int64_t> cut(p.size() + 1, 0);
  double cum = 0;
  for (size_t j = 0; j + 1 < p.size(); ++j) {
    cum += p[j];
    cut[j + 1] = std::clamp(int64_t(std::floor(cum * double(n))), cut[j], n);
  }
  cut[p.size()] = n;
  return cut;
}

std::vector<std::vector<int64_t>> partition_dirichlet(std::span<const int64_t> labels,
                                                      int num_classes, const PartitionOptions& o) {
  // Each class's samples, shuffled once on their own stream: the redraws below change only the
  // shares, so a redraw is cheap and the shuffle does not depend on how many there were.
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) by_class[size_t(labels[i])].push_back(int64_t(i));
  const uint64_t shuffle_seed = derive_seed(o.seed, "fl.partition.shuffle");
  for (int k = 0; k < num_classes; ++k) {
    PhiloxStream rng(shuffle_seed, uint64_t(k));
    shuffle(by_class[size_t(k)], rng);
  }

  PhiloxStream draws(derive_seed(o.seed, "fl.partition.dirichlet"));
  std::vector<std::vector<int64_t>> cuts(static_cast<size_t>(num_classes));
  int64_t smallest = 0;
  for (int attempt = 0; attempt < kMaxDirichletAttempts; ++attempt) {
    std::vector<int64_t> sizes(size_t(o.clients), 0);
    for (int k = 0; k < num_classes; ++k) {
      const int64_t n = int64_t(by_class[size_t(k)].size());
      cuts[size_t(k)] = cuts_for(sample_dirichlet(o.alpha, o.clients, draws), n);
      for (int j = 0; j < o.clients; ++j) {
        sizes[size_t(j)] += cuts[size_t(k)][size_t(j) + 1] - cuts[size_t(k)][size_t(j)];
      }
    }
    smallest = *std::min_element(sizes.begin(), sizes.end());
    if (smallest < o.min_samples) continue;
    std::vector<std::vector<int64_t>> parts(static_cast<size_t>(o.clients));
    for (int k = 0; k < num_classes; ++k) {
      const auto& idx = by_class[size_t(k)];
      for (int j = 0; j < o.clients; ++j) {
        parts[size_t(j)].insert(parts[size_t(j)].end(), idx.begin() + cuts[size_t(k)][size_t(j)],
                                idx.begin() + cuts[size_t(k)][size_t(j) + 1]);
      }
    }
    return parts;
  }
  throw InvalidArgument(detail::str(
      "fl.partition = dirichlet: after ", kMaxDirichletAttempts, " draws some client still held ",
      "fewer than fl.min_samples = ", o.min_samples, " samples (the last draw's smallest: ",
      smallest, "), with fl.alpha = ", o.alpha, ", fl.clients = ", o.clients, " and ",
      labels.size(), " samples; raise fl.alpha or lower fl.min_samples (or fl.clients)"));
}

}  // namespace

double PhiloxStream::uniform() {
  // The top 53 bits, centred in their cell: (0, 1) exactly, never 0 nor 1.
  return (double(bits64() >> 11) + 0.5) * 0x1.0p-53;
}

double PhiloxStream::normal() {
  Philox::Block b = philox_.block(counter_++, stream_);
  double u1 = (double(((uint64_t(b[1]) << 32) | b[0]) >> 11) + 0.5) * 0x1.0p-53;
  double u2 = double(((uint64_t(b[3]) << 32) | b[2]) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t PhiloxStream::bits64() {
  Philox::Block b = philox_.block(counter_++, stream_);
  return (uint64_t(b[1]) << 32) | b[0];
}

uint64_t PhiloxStream::below(uint64_t n) {
  // Lemire's multiply-shift; its bias (n / 2^64) is far below anything a test could see.
  return uint64_t((static_cast<unsigned __int128>(bits64()) * n) >> 64);
}

double sample_log_gamma(double shape, PhiloxStream& rng) {
  COHORT_CHECK_ARG(shape > 0 && std::isfinite(shape), "Gamma shape must be > 0, got ", shape);
  if (shape < 1) {
    // Boost: G(a) = G(a + 1) * U^(1/a) (Marsaglia & Tsang, section 6).
    double log_u = std::log(rng.uniform());
    return sample_log_gamma(shape + 1, rng) + log_u / shape;
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double log_u = std::log(rng.uniform());
    // The squeeze (u < 1 - 0.0331 x^4) is only a speed-up; the exact test alone is correct.
    if (log_u < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d) + std::log(v);
  }
}

double sample_gamma(double shape, PhiloxStream& rng) {
  return std::exp(sample_log_gamma(shape, rng));
}

std::vector<double> sample_dirichlet(double alpha, int k, PhiloxStream& rng) {
  COHORT_CHECK_ARG(k >= 1, "Dirichlet dimension must be >= 1, got ", k);
  std::vector<double> g(static_cast<size_t>(k));
  for (double& x : g) x = sample_log_gamma(alpha, rng);
  const double top = *std::max_element(g.begin(), g.end());
  double sum = 0;
  for (double& x : g) sum += (x = std::exp(x - top));
  for (double& x : g) x /= sum;
  return g;
}

std::vector<std::vector<int64_t>> partition_indices(std::span<const int64_t> labels,
                                                    int num_classes,
                                                    const PartitionOptions& options) {
  validate(labels, num_classes, options);
  auto parts = options.kind == PartitionKind::kIid
                   ? partition_iid(int64_t(labels.size()), options)
                   : partition_dirichlet(labels, num_classes, options);
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

std::vector<std::vector<int64_t>> label_histogram(std::span<const int64_t> labels, int num_classes,
                                                  const std::vector<std::vector<int64_t>>& parts) {
  std::vector<std::vector<int64_t>> counts(parts.size(), std::vector<int64_t>(size_t(num_classes)));
  for (size_t c = 0; c < parts.size(); ++c) {
    for (int64_t i : parts[c]) {
      COHORT_CHECK_ARG(i >= 0 && i < int64_t(labels.size()), "label_histogram: client ", c,
                       " holds index ", i, ", outside [0, ", labels.size(), ")");
      const int64_t y = labels[size_t(i)];
      COHORT_CHECK_ARG(y >= 0 && y < num_classes, "label_histogram: label ", y, " of sample ", i,
                       " is outside [0, ", num_classes, ")");
      ++counts[c][size_t(y)];
    }
  }
  return counts;
}

std::string format_histogram(const std::vector<std::vector<int64_t>>& counts) {
  const size_t classes = counts.empty() ? 0 : counts[0].size();
  int64_t widest = 0;
  for (const auto& row : counts) widest += std::accumulate(row.begin(), row.end(), int64_t(0));
  const int w = std::max<int>(5, int(std::to_string(widest).size()) + 1);
  std::ostringstream os;
  os << std::setw(6) << "client" << std::setw(w + 1) << "total"
     << "  |";
  for (size_t k = 0; k < classes; ++k) os << std::setw(w) << k;
  os << '\n';
  for (size_t c = 0; c < counts.size(); ++c) {
    int64_t total = std::accumulate(counts[c].begin(), counts[c].end(), int64_t(0));
    os << std::setw(6) << c << std::setw(w + 1) << total << "  |";
    for (int64_t x : counts[c]) os << std::setw(w) << x;
    os << '\n';
  }
  return os.str();
}

nlohmann::json histogram_json(const std::vector<std::vector<int64_t>>& counts) {
  nlohmann::json totals = nlohmann::json::array();
  for (const auto& row : counts)
    totals.push_back(std::accumulate(row.begin(), row.end(), int64_t(0)));
  return {{"clients", counts.size()},
          {"classes", counts.empty() ? 0 : counts[0].size()},
          {"totals", totals},
          {"counts", counts}};
}

PartitionKind parse_partition_kind(const std::string& name) {
  if (name == "iid") return PartitionKind::kIid;
  if (name == "dirichlet") return PartitionKind::kDirichlet;
  throw InvalidArgument("fl.partition: unknown partition \"" + name +
                        "\"; expected one of: iid, dirichlet");
}

std::string partition_kind_name(PartitionKind kind) {
  return kind == PartitionKind::kIid ? "iid" : "dirichlet";
}

}  // namespace cohort::federated
