#pragma once
// The mean of K per-slot gradients summed in slot order, whoever computed each slot: the
// reduction of elastic training's exact mode (elastic.exact, docs/elastic.md). A float sum
// depends on its order; an allreduce sums in an order set by the ring or tree and the world
// size, so the same gradients reduced by 4 workers and by 3 differ in their last bits. Here
// element i of the result is ((g_0[i] + g_1[i]) + ... + g_{K-1}[i]) / K on any number of
// workers, so a run that loses or gains workers keeps the bits of a run that did not.
//
// Slot k is computed by rank k % W (W the group's size; W <= K). Each rank owns a contiguous
// shard of the vector: the ranks send each owner its shard of every slot they computed (one
// batch of point-to-point operations, an all-to-all), each owner sums its shard over the K
// slots in order, and an allgatherv assembles the whole. A rank that computed m slots sends
// (m + 1) x n x (W - 1) / W elements and receives (K - m) x n / W + n x (W - 1) / W: with one
// slot per rank both are a ring allreduce's 2 n (W - 1) / W, but in two latency rounds of
// W - 1 messages each.
//
//   std::vector<int64_t> mine = slots_of_rank(K, W, rank);  // k = rank, rank + W, ...
//   ordered_slot_mean(group, K, grads.data(), n, mean.data());  // grads: mine.size() x n
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cohort/comm/process_group.h"

namespace cohort::parallel {

// The slots rank `rank` of `workers` computes out of `slots`: rank, rank + workers, ...
std::vector<int64_t> slots_of_rank(int64_t slots, int workers, int rank);

struct OrderedMeanStats {
  size_t bytes_sent = 0, bytes_received = 0;
};

// `mine`: this rank's slots_of_rank(slots, size, rank) gradients, each `n` floats, in that
// order. `out` (n floats, may not alias `mine`): the mean over all `slots` slots, the same
// bits on every rank and for every group size. Collective; the group's deadline applies.
OrderedMeanStats ordered_slot_mean(comm::ProcessGroup& group, int64_t slots, const float* mine,
                                   size_t n, float* out);

}  // namespace cohort::parallel
