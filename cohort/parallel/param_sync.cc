#include "cohort/parallel/param_sync.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace cohort::parallel {
namespace {

using Millis = std::chrono::milliseconds;

// Every rank's `local` (same length on every rank), rank k's block at k * local.size().
std::vector<uint64_t> allgather_u64(comm::ProcessGroup& g, const std::vector<uint64_t>& local,
                                    Millis timeout) {
  std::vector<uint64_t> all(local.size() * size_t(g.size()));
  if (local.empty()) return all;
  g.allgather({.input = local.data(),
               .output = all.data(),
               .count = local.size(),
               .dtype = comm::DType::i64,
               .timeout = timeout});
  return all;
}

// Rank 0's string on every rank.
std::string broadcast_string(comm::ProcessGroup& g, const std::string& s, Millis timeout) {
  int64_t n = int64_t(s.size());
  g.broadcast({.buffer = &n, .count = 1, .dtype = comm::DType::i64, .timeout = timeout});
  std::string out = g.rank() == 0 ? s : std::string(size_t(n), '\0');
  if (n > 0) {
    g.broadcast(
        {.buffer = out.data(), .count = size_t(n), .dtype = comm::DType::u8, .timeout = timeout});
  }
  return out;
}

std::string describe(const nn::NamedTensors& entries, size_t i) {
  if (i >= entries.size()) return "no entry";
  const Tensor& t = entries[i].second;
  return detail::str("'", entries[i].first, "' ", shape_str(t.shape()), " ", dtype_name(t.dtype()));
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// Hash of (name, shape, dtype); never 0, which marks "no entry at this index".
uint64_t signature(const std::string& name, const Tensor& t) {
  std::string d = name + "|" + shape_str(t.shape()) + "|" + dtype_name(t.dtype());
  return hash_bytes(d.data(), d.size()) | 1u;
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  size_t i = 0;
  // Eight bytes per step keeps hashing a large model cheap; the tail goes byte by byte.
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void verify_same_structure(comm::ProcessGroup& group, const nn::NamedTensors& entries,
                           Millis timeout) {
  auto counts = allgather_u64(group, {uint64_t(entries.size())}, timeout);
  size_t width = size_t(*std::max_element(counts.begin(), counts.end()));
  std::vector<uint64_t> sig(width, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    sig[i] = signature(entries[i].first, entries[i].second);
  }
  auto all = allgather_u64(group, sig, timeout);
  for (size_t i = 0; i < width; ++i) {
    std::vector<int> differ;
    for (int r = 1; r < group.size(); ++r) {
      if (all[size_t(r) * width + i] != all[i]) differ.push_back(r);
    }
    if (differ.empty()) continue;
    // Every rank reaches this point for the same i, so the broadcast is collective.
    std::string at_root = broadcast_string(group, describe(entries, i), timeout);
    bool me = std::find(differ.begin(), differ.end(), group.rank()) != differ.end();
    std::string mine =
        me ? detail::str(" (this rank, ", group.rank(), ", has ", describe(entries, i), ")") : "";
    throw InvalidArgument(detail::str(
        "DDP: parameters differ across ranks at #", i, ": rank 0 has ", at_root, "; rank(s) ",
        join_ranks(differ), " differ", mine,
        ". Every rank must build the same model (same layer sizes, in the same order)."));
  }
}

void broadcast_from_rank0(comm::ProcessGroup& group, const nn::NamedTensors& entries,
                          Millis timeout) {
  for (const auto& [name, t] : entries) {
    COHORT_CHECK_ARG(t.is_contiguous(), "DDP: cannot broadcast '", name,
                     "': it is not contiguous (shape ", shape_str(t.shape()), ")");
    if (t.numel() == 0) continue;
    group.broadcast({.buffer = t.raw_data(),
                     .count = size_t(t.numel()),
                     .dtype = t.dtype(),
                     .root = 0,
                     .timeout = timeout});
  }
}

void check_in_sync(comm::ProcessGroup& group, const nn::NamedTensors& entries, Millis timeout) {
  std::vector<uint64_t> local;
  local.reserve(entries.size());
  for (const auto& [name, t] : entries) {
    Tensor c = t.contiguous_raw();
    local.push_back(hash_bytes(c.raw_data(), c.nbytes()));
  }
  auto all = allgather_u64(group, local, timeout);
  size_t n = entries.size();
  std::vector<int> differ;
  std::string first;  // the first differing tensor of the first differing rank
  for (int r = 1; r < group.size(); ++r) {
    for (size_t i = 0; i < n; ++i) {
      if (all[size_t(r) * n + i] == all[i]) continue;
      if (differ.empty()) first = detail::str("'", entries[i].first, "' (rank ", r, ")");
      differ.push_back(r);
      break;
    }
  }
  COHORT_CHECK_ARG(differ.empty(), "DDP: parameters out of sync: rank(s) ", join_ranks(differ),
                   " differ from rank 0; first differing parameter ", first,
                   ". Replicas diverged: check that every rank applies the same optimizer "
                   "step to the averaged gradients and nothing else writes the parameters.");
}

}  // namespace cohort::parallel
