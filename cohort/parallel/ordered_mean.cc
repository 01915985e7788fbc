#include "cohort/parallel/ordered_mean.h"

#include <algorithm>

#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

constexpr uint32_t kOrderedMeanTag = 0x0E1A;

// Rank s owns elements [shard_begin(s), shard_begin(s + 1)).
size_t shard_begin(size_t n, int workers, int s) {
  return n * size_t(s) / size_t(workers);
}

// Sums the K rows element by element in row order, then divides by K: the same operations,
// in the same order, for every element, whatever the shard bounds are.
void sum_in_order(const std::vector<const float*>& rows, size_t len, float* out) {
  std::copy(rows[0], rows[0] + len, out);
  for (size_t k = 1; k < rows.size(); ++k)
    for (size_t i = 0; i < len; ++i) out[i] += rows[k][i];
  const float slots = float(rows.size());
  for (size_t i = 0; i < len; ++i) out[i] /= slots;
}

}  // namespace

std::vector<int64_t> slots_of_rank(int64_t slots, int workers, int rank) {
  std::vector<int64_t> out;
  for (int64_t k = rank; k < slots; k += workers) out.push_back(k);
  return out;
}

OrderedMeanStats ordered_slot_mean(comm::ProcessGroup& g, int64_t slots, const float* mine,
                                   size_t n, float* out) {
  const int workers = g.size(), rank = g.rank();
  COHORT_CHECK_ARG(slots >= workers, "ordered_slot_mean: ", slots, " slots for ", workers,
                   " workers: every worker needs at least one slot");
  COHORT_CHECK_ARG(out != mine, "ordered_slot_mean: out must not alias the slots");
  const size_t from = shard_begin(n, workers, rank);
  const size_t len = shard_begin(n, workers, rank + 1) - from;
  const size_t computed = slots_of_rank(slots, workers, rank).size();
  std::vector<std::vector<float>> to(static_cast<size_t>(workers));
  std::vector<std::vector<float>> from_peer(static_cast<size_t>(workers));
  std::vector<comm::P2POp> ops;
  OrderedMeanStats stats;
  for (int p = 0; p < workers; ++p) {
    if (p == rank) continue;
    const size_t p_from = shard_begin(n, workers, p);
    const size_t p_len = shard_begin(n, workers, p + 1) - p_from;
    std::vector<float>& out_p = to[size_t(p)];
    out_p.resize(computed * p_len);
    for (size_t j = 0; j < computed; ++j)
      std::copy(mine + j * n + p_from, mine + j * n + p_from + p_len, out_p.data() + j * p_len);
    std::vector<float>& in_p = from_peer[size_t(p)];
    in_p.resize(slots_of_rank(slots, workers, p).size() * len);
    // Both sides compute the same sizes, so an empty message is skipped by both.
    if (!out_p.empty())
      ops.push_back(
          {comm::P2POp::kSend, out_p.data(), out_p.size(), DType::f32, p, kOrderedMeanTag});
    if (!in_p.empty())
      ops.push_back({comm::P2POp::kRecv, in_p.data(), in_p.size(), DType::f32, p, kOrderedMeanTag});
    stats.bytes_sent += out_p.size() * sizeof(float);
    stats.bytes_received += in_p.size() * sizeof(float);
  }
  if (!ops.empty()) g.batch_send_recv(ops);
  std::vector<const float*> rows(static_cast<size_t>(slots));
  for (int64_t k = 0; k < slots; ++k) {
    const int p = int(k % workers);
    const size_t j = size_t(k / workers);
    rows[size_t(k)] = p == rank ? mine + j * n + from : from_peer[size_t(p)].data() + j * len;
  }
  if (len > 0) sum_in_order(rows, len, out + from);
  std::vector<size_t> counts;
  for (int p = 0; p < workers; ++p)
    counts.push_back(shard_begin(n, workers, p + 1) - shard_begin(n, workers, p));
  if (workers > 1) g.allgatherv({.input = nullptr, .output = out, .counts = counts});
  stats.bytes_sent += len * sizeof(float) * size_t(workers - 1);
  stats.bytes_received += (n - len) * sizeof(float);
  return stats;
}

}  // namespace cohort::parallel
