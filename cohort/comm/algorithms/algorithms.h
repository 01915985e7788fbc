#pragma once
// Collective algorithms, written only against the transport (through Exec). Buffers are raw
// bytes of Exec::sig().dtype; counts are in elements. Each function is run by every rank of
// the communicator with the same arguments (except buffers) and leaves bit-identical results
// on every rank: reductions happen in an order fixed by (world size, root, algorithm), and a
// value is reduced once and then copied, never reduced separately on different ranks.
#include <cstddef>
#include <vector>

#include "cohort/comm/algorithms/exec.h"
#include "cohort/comm/topology.h"

namespace cohort::comm::algo {

// Element offsets and lengths of the n blocks a ring moves.
struct Segments {
  std::vector<size_t> offset;
  std::vector<size_t> length;
  // count split into n near-equal blocks (the first count % n get one more element).
  static Segments even(size_t count, int n);
  // Blocks of the given lengths, back to back.
  static Segments of(const std::vector<size_t>& lengths);
};

// Ring allreduce = 2(n-1) steps over segments: steps [0, n-1) reduce-scatter (each segment is
// folded along the ring, "incoming op local", starting one rank after its owner, so rank r
// ends with segment r fully reduced), steps [n-1, 2n-2) allgather (segments are copied around).
// Each segment streams in chunks: a chunk is forwarded as soon as it has arrived, so the steps
// overlap. ring_pass runs steps [first, last); with finish_avg the owner divides its segment by
// n when it is complete.
struct RingPass {
  char* buf = nullptr;
  const Segments* segments = nullptr;
  int first_step = 0;
  int last_step = 0;
  bool finish_avg = false;
  size_t chunk_bytes = size_t{256} << 10;
};
void ring_pass(Exec& ex, const RingPass& pass);

void allreduce_ring(Exec& ex, char* buf, size_t count, size_t chunk_bytes);
// log2(n) full exchanges (plus a fold for the ranks beyond the largest power of two). Each
// pair combines "lower ranks' value op higher ranks' value", so both partners compute the same
// bits. For small messages.
void allreduce_recursive_doubling(Exec& ex, char* buf, size_t count);
// Rabenseifner: reduce-scatter by recursive halving, allgather by recursive doubling; ranks
// beyond the largest power of two fold into a partner first.
void allreduce_halving_doubling(Exec& ex, char* buf, size_t count);

// Hierarchical (topo from the communicator): a pipelined chain reduce to each host's leader
// (its lowest rank), a ring allreduce among the leaders, a broadcast within each host. Only
// the ring crosses hosts. avg divides once, by the world size, on the leaders, which hold the
// same bits; so every rank ends with the same bits.
void allreduce_hierarchical(Exec& ex, char* buf, size_t count, const HostTopology& topo,
                            size_t chunk_bytes);
// Buffers in shared arenas (Algorithm::kSharedBuffers; `in` and `out` lie in this rank's
// arena, `in` may equal `out`): the ranks exchange their buffers' arena offsets (which also
// says "my input is ready"), rank r reduces segment r of every rank's input, in rank order,
// straight out of their arenas, and writes the result into every rank's output piece by piece
// while it is in cache; all meet again before anyone returns (every output is complete, and no
// input is read any more). Each byte of a segment crosses to a peer once, as a write: a second
// phase that copied the other segments out of their owners' outputs cost a third meeting and
// a second crossing of every byte (10 against 13 GB/s at 2 MiB, 2 ranks, docs/comm.md).
void allreduce_shared_buffers(Exec& ex, const char* in, char* out, size_t count);

// On the current group (Exec::set_group): position 0 ends with every position's buffer
// folded in; the others' buffers hold partial results. Chunked and pipelined.
void reduce_chain_to_first(Exec& ex, char* buf, size_t bytes, size_t chunk_bytes);

// in: n * count elements; out: count elements (this rank's block, reduced).
void reduce_scatter_ring(Exec& ex, const char* in, char* out, size_t count, size_t chunk_bytes);
// buf holds every rank's block at segments; this rank's block is filled in already.
void allgather_ring(Exec& ex, char* buf, const Segments& segments, size_t chunk_bytes);

void broadcast_tree(Exec& ex, char* buf, size_t bytes, int root);
// Pipelined chain root -> root+1 -> ...: each chunk is forwarded as soon as it arrives.
void broadcast_chain(Exec& ex, char* buf, size_t bytes, int root, size_t chunk_bytes);

// out is only written (and only needed) on root.
void reduce_tree(Exec& ex, const char* in, char* out, size_t count, int root);
// Ring reduce-scatter, then each rank sends its reduced block to root.
void reduce_ring(Exec& ex, const char* in, char* out, size_t count, int root, size_t chunk_bytes);

void barrier_dissemination(Exec& ex);
// in: count elements; out (root only): n * count.
void gather_direct(Exec& ex, const char* in, char* out, size_t count, int root);
// in (root only): n * count elements; out: count.
void scatter_direct(Exec& ex, const char* in, char* out, size_t count, int root);
// in and out: n * count elements; block k of in goes to rank k, block k of out comes from k.
void alltoall_direct(Exec& ex, const char* in, char* out, size_t count);

}  // namespace cohort::comm::algo
