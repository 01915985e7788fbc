// Allreduce over buffers in the ranks' shared arenas (see algorithms.h).
#include <algorithm>
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/reduce.h"
#include "cohort/comm/transport/shm/shm_arena.h"

namespace cohort::comm::algo {
namespace {

// Where a rank's input and output lie in its arena.
struct Offsets {
  uint64_t in, out;
};

// Sends `mine` to every peer and receives theirs (n - 1 small messages each way). Doubles as
// a barrier: nobody gets past it before everybody has reached it.
std::vector<Offsets> exchange(Exec& ex, Offsets mine) {
  int n = ex.size(), r = ex.rank();
  std::vector<Offsets> all(size_t(n), mine);
  std::vector<transport::Request> reqs;
  for (int k = 0; k < n; ++k) {
    if (k == r) continue;
    reqs.push_back(ex.recv(k, &all[size_t(k)], sizeof(Offsets)));
    reqs.push_back(ex.send(k, &mine, sizeof(Offsets)));
  }
  ex.wait_all(reqs);
  return all;
}

// Pieces small enough that the partial sum of more than two inputs stays in L2.
constexpr size_t kPieceBytes = size_t{64} << 10;

// Every rank's out[lo, hi) = in_0 op in_1 op ... op in_{n-1} over those elements, left to right
// (then / n for avg). Piece by piece: the result is formed in this rank's own output (two
// inputs, one pass: reduce_into_two) or in scratch that stays in L2 (more inputs), and then
// copied to every other output while it is still in cache, so each byte of the segment
// crosses to a peer once, as a write. In place is safe: only this rank touches segment
// [lo, hi) of any buffer, and each piece is read from every input before it is written
// anywhere.
void reduce_segment_to_all(Exec& ex, const std::vector<const char*>& ins,
                           const std::vector<char*>& outs, int self, size_t lo, size_t hi) {
  size_t elem = ex.elem(), n = ins.size();
  const auto& sig = ex.sig();
  size_t piece = std::max<size_t>(1, kPieceBytes / elem);
  // A peer whose call failed (a timeout) has returned and may use its buffer again: never
  // write into it. (It can still leave between this look and the write; it failed at its
  // deadline, so this rank came that late.)
  auto check_present = [&](size_t k) {
    COHORT_CHECK_IO(int(k) == self || !ex.peer_left(int(k)), "allreduce (shared buffers): rank ", k,
                    " left the call (its side failed or closed) before rank ", self,
                    " wrote its segment into rank ", k, "'s buffer; check rank ", k,
                    "'s log for why");
  };
  if (n == 2) {
    char *own = outs[size_t(self)], *other = outs[size_t(1 - self)];
    for (size_t a = lo; a < hi; a += piece) {
      size_t m = std::min(piece, hi - a), at = a * elem;
      check_present(size_t(1 - self));
      reduce_into_two(sig.dtype, sig.reduce_op, own + at, other + at, ins[0] + at, ins[1] + at, m,
                      int(n));
    }
    return;
  }
  char* acc = ex.scratch(0, piece * elem);
  for (size_t a = lo; a < hi; a += piece) {
    size_t m = std::min(piece, hi - a), at = a * elem;
    ex.combine(acc, ins[0] + at, ins[1] + at, m);
    for (size_t k = 2; k < n; ++k) ex.combine(acc, acc, ins[k] + at, m);
    if (sig.reduce_op == ReduceOp::avg) divide_by(sig.dtype, acc, m, int(n));
    for (size_t k = 0; k < n; ++k) {
      check_present(k);
      std::memcpy(outs[k] + at, acc, m * elem);
    }
  }
}

}  // namespace

void allreduce_shared_buffers(Exec& ex, const char* in, char* out, size_t count) {
  int n = ex.size(), r = ex.rank();
  const transport::ShmArena& own = *ex.own_arena();
  auto offsets = exchange(ex, {own.offset_of(in), own.offset_of(out)});
  auto arena_of = [&](int k) { return k == r ? &own : ex.peer_arena(k); };
  size_t bytes = count * ex.elem();
  for (int k = 0; k < n; ++k) {  // a peer's offsets must lie in its arena: never read past it
    const Offsets& o = offsets[size_t(k)];
    size_t size = arena_of(k)->size();
    COHORT_CHECK_IO(o.in <= size && o.out <= size && bytes <= size - o.in && bytes <= size - o.out,
                    "allreduce (shared buffers): rank ", k, " sent buffer offsets ", o.in, "/",
                    o.out, " for ", bytes, " bytes, outside its ", size,
                    "-byte arena; is it another cohort version?");
  }
  std::vector<const char*> ins(static_cast<size_t>(n));
  std::vector<char*> outs(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    ins[size_t(k)] = arena_of(k)->base() + offsets[size_t(k)].in;
    outs[size_t(k)] = arena_of(k)->base() + offsets[size_t(k)].out;
  }
  outs[size_t(r)] = out;
  Segments segs = Segments::even(count, n);
  size_t elem = ex.elem();
  reduce_segment_to_all(ex, ins, outs, r, segs.offset[size_t(r)],
                        segs.offset[size_t(r)] + segs.length[size_t(r)]);
  exchange(ex, {});  // every output is complete, and nobody reads an input any more
  // Traffic, each way: this rank read n - 1 peers' inputs of its segment and wrote its segment
  // into their outputs; peers read the rest of our input and wrote the rest of our output.
  const uint64_t mine = segs.length[size_t(r)] * elem, moved = (n - 1) * mine + (bytes - mine);
  ex.count_shared_traffic(moved, moved);
}

}  // namespace cohort::comm::algo
