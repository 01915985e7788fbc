// Recursive doubling allreduce for small messages.
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm::algo {

namespace {
int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Non-powers of two: a rank r >= p hands its whole buffer to r - p and later receives the
// result from it. Returns true on such a rank (its part is then done).
bool delegate_to_partner(Exec& ex, char* buf, size_t bytes, int p) {
  int r = ex.rank();
  if (r < p) return false;
  auto s = ex.send(r - p, buf, bytes);
  ex.wait(s);
  auto q = ex.recv(r - p, buf, bytes);
  ex.wait(q);
  return true;
}
}  // namespace

// Ranks >= p (the largest power of two <= n) hand their data to rank - p and get the result
// back at the end; the p others exchange whole buffers with partner rank ^ mask.
void allreduce_recursive_doubling(Exec& ex, char* buf, size_t count) {
  int n = ex.size(), r = ex.rank(), p = floor_pow2(n), extra = n - p;
  size_t bytes = count * ex.elem();
  if (delegate_to_partner(ex, buf, bytes, p)) return;
  char* tmp = ex.scratch(1, bytes);
  if (r < extra) {
    auto q = ex.recv(r + p, tmp, bytes);
    ex.wait(q);
    ex.combine(buf, buf, tmp, count);  // lower rank's value first
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    int partner = r ^ mask;
    std::vector<transport::Request> reqs;
    // Send first: a mismatched partner then sees our header even if we fail on theirs.
    reqs.push_back(ex.send(partner, buf, bytes));
    reqs.push_back(ex.recv(partner, tmp, bytes));
    ex.wait_all(reqs);
    if (r < partner) {
      ex.combine(buf, buf, tmp, count);
    } else {
      ex.combine(buf, tmp, buf, count);
    }
  }
  if (ex.sig().reduce_op == ReduceOp::avg) divide_by(ex.sig().dtype, buf, count, n);
  if (r < extra) {
    auto s = ex.send(r + p, buf, bytes);
    ex.wait(s);
  }
}

}  // namespace cohort::comm::algo

namespace cohort::comm::algo {

namespace {
struct Range {
  size_t lo, hi;  // elements
};
}  // namespace

// Rabenseifner. Halving: at mask m (p/2 down to 1) partners r and r ^ m hold the same range;
// the one with bit m clear keeps the lower half and folds the partner's copy of it in (the
// other keeps the upper half), so after log2(p) steps rank r owns block r, reduced once.
// Doubling replays the splits in reverse, swapping owned ranges. Only the owner of a range
// reduces it and everyone else copies, so all ranks end with the same bits.
void allreduce_halving_doubling(Exec& ex, char* buf, size_t count) {
  int n = ex.size(), r = ex.rank(), p = floor_pow2(n), extra = n - p;
  size_t elem = ex.elem(), bytes = count * elem;
  if (delegate_to_partner(ex, buf, bytes, p)) return;
  if (r < extra) {
    auto q = ex.recv_reduce(r + p, buf, bytes);
    ex.wait(q);
  }
  std::vector<Range> parents;
  Range cur{0, count};
  for (int mask = p / 2; mask >= 1; mask /= 2) {
    int partner = r ^ mask;
    size_t mid = cur.lo + (cur.hi - cur.lo) / 2;
    Range keep = (r & mask) ? Range{mid, cur.hi} : Range{cur.lo, mid};
    Range give = (r & mask) ? Range{cur.lo, mid} : Range{mid, cur.hi};
    std::vector<transport::Request> reqs;
    reqs.push_back(ex.send(partner, buf + give.lo * elem, (give.hi - give.lo) * elem));
    reqs.push_back(ex.recv_reduce(partner, buf + keep.lo * elem, (keep.hi - keep.lo) * elem));
    ex.wait_all(reqs);
    parents.push_back(cur);
    cur = keep;
  }
  if (ex.sig().reduce_op == ReduceOp::avg) {
    divide_by(ex.sig().dtype, buf + cur.lo * elem, cur.hi - cur.lo, n);
  }
  for (int mask = 1; mask < p; mask *= 2) {
    Range parent = parents.back();
    parents.pop_back();
    Range theirs = (r & mask) ? Range{parent.lo, cur.lo} : Range{cur.hi, parent.hi};
    int partner = r ^ mask;
    std::vector<transport::Request> reqs;
    reqs.push_back(ex.send(partner, buf + cur.lo * elem, (cur.hi - cur.lo) * elem));
    reqs.push_back(ex.recv(partner, buf + theirs.lo * elem, (theirs.hi - theirs.lo) * elem));
    ex.wait_all(reqs);
    cur = parent;
  }
  if (r < extra) {
    auto s = ex.send(r + p, buf, bytes);
    ex.wait(s);
  }
}

}  // namespace cohort::comm::algo
