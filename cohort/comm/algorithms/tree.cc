// Rooted collectives: binomial-tree broadcast and reduce, pipelined chain broadcast.
#include <algorithm>
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm::algo {

// Virtual rank v = (r - root) mod n. v receives from v - (its lowest set bit), then sends to
// v + mask for every smaller power of two mask with v + mask < n.
void broadcast_tree(Exec& ex, char* buf, size_t bytes, int root) {
  int n = ex.size(), v = (ex.rank() - root + n) % n;
  auto real = [&](int vr) { return (vr + root) % n; };
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      auto q = ex.recv(real(v - mask), buf, bytes);
      ex.wait(q);
      break;
    }
    mask <<= 1;
  }
  std::vector<transport::Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) sends.push_back(ex.send(real(v + mask), buf, bytes));
  }
  ex.wait_all(sends);
}

void broadcast_chain(Exec& ex, char* buf, size_t bytes, int root, size_t chunk_bytes) {
  int n = ex.size(), r = ex.rank(), v = (r - root + n) % n;
  if (n == 1 || bytes == 0) return;
  int right = (r + 1) % n, left = (r + n - 1) % n;
  size_t per = std::max<size_t>(chunk_bytes / ex.elem(), 1) * ex.elem();
  std::vector<transport::Request> sends, recvs;
  if (v == 0) {
    for (size_t o = 0; o < bytes; o += per)
      sends.push_back(ex.send(right, buf + o, std::min(per, bytes - o)));
    ex.wait_all(sends);
    return;
  }
  for (size_t o = 0; o < bytes; o += per)
    recvs.push_back(ex.recv(left, buf + o, std::min(per, bytes - o)));
  size_t i = 0;
  for (size_t o = 0; o < bytes; o += per, ++i) {
    ex.wait(recvs[i]);
    if (v < n - 1) sends.push_back(ex.send(right, buf + o, std::min(per, bytes - o)));
  }
  ex.wait_all(sends);
}

// Mirror of broadcast_tree: v accumulates its subtree (own value first, then v + 1, v + 2,
// v + 4, ... in that order), then sends the sum to its parent.
void reduce_tree(Exec& ex, const char* in, char* out, size_t count, int root) {
  int n = ex.size(), r = ex.rank(), v = (r - root + n) % n;
  auto real = [&](int vr) { return (vr + root) % n; };
  size_t bytes = count * ex.elem();
  char* acc = r == root ? out : ex.scratch(0, bytes);
  if (acc != in) std::memmove(acc, in, bytes);
  char* tmp = ex.scratch(1, bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      auto s = ex.send(real(v - mask), acc, bytes);
      ex.wait(s);
      return;
    }
    if (v + mask < n) {
      auto q = ex.recv(real(v + mask), tmp, bytes);
      ex.wait(q);
      ex.combine(acc, acc, tmp, count);
    }
  }
  if (ex.sig().reduce_op == ReduceOp::avg) divide_by(ex.sig().dtype, acc, count, n);
}

}  // namespace cohort::comm::algo
