#pragma once
// Helpers for the ProcessGroup tests: ranks as threads, each with a native ProcessGroup over
// one HashStore, and the inputs/references of reduce_scatter and allgatherv.
#include <functional>
#include <memory>
#include <vector>

#include "cohort/comm/process_group.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm::testing {

inline const std::vector<size_t> kOddSizes = {0, 1, 7, 1009};

// Runs fn(group) on `size` ranks-as-threads over shared memory.
inline void with_groups(int size, const std::function<void(ProcessGroup&)>& fn,
                        transport::TransportKind kind = transport::TransportKind::kShm) {
  auto store = std::make_shared<rendezvous::HashStore>();
  CommOptions options = test_options(kind);
  run_ranks(size, [&](int r) {
    auto pg = make_process_group(Communicator::create(store, r, size, options));
    fn(*pg);
  });
}

// allgatherv's counts for `size` ranks around `base`: uneven, and rank 1 contributes nothing.
inline std::vector<size_t> uneven_counts(int size, size_t base) {
  std::vector<size_t> counts;
  for (int k = 0; k < size; ++k) counts.push_back(k == 1 ? 0 : base + size_t(k) * 3);
  return counts;
}

// What allgatherv must produce: rank k's make_input block of counts[k] elements, in rank order.
inline std::vector<char> allgatherv_reference(DType t, const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<char> out(total * dtype_size(t) + 1);
  size_t at = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    auto block = make_input(t, ReduceOp::sum, int(k), counts[k]);
    std::copy(block.begin(), block.begin() + long(counts[k] * dtype_size(t)),
              out.begin() + long(at * dtype_size(t)));
    at += counts[k];
  }
  return out;
}

}  // namespace cohort::comm::testing
