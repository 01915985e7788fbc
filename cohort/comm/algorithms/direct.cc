// One message per peer: gather, scatter, alltoall; and the dissemination barrier.
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"

namespace cohort::comm::algo {

// Round k: send an empty message to rank + 2^k, receive one from rank - 2^k. After
// ceil(log2 n) rounds every rank has heard (transitively) from every other.
void barrier_dissemination(Exec& ex) {
  int n = ex.size(), r = ex.rank();
  for (int d = 1; d < n; d <<= 1) {
    std::vector<transport::Request> reqs;
    reqs.push_back(ex.send((r + d) % n, nullptr, 0));
    reqs.push_back(ex.recv((r - d + n) % n, nullptr, 0));
    ex.wait_all(reqs);
  }
}

void gather_direct(Exec& ex, const char* in, char* out, size_t count, int root) {
  int n = ex.size(), r = ex.rank();
  size_t bytes = count * ex.elem();
  if (r != root) {
    auto s = ex.send(root, in, bytes);
    ex.wait(s);
    return;
  }
  std::vector<transport::Request> recvs;
  for (int k = 0; k < n; ++k) {
    if (k != root) recvs.push_back(ex.recv(k, out + size_t(k) * bytes, bytes));
  }
  if (out + size_t(r) * bytes != in) std::memmove(out + size_t(r) * bytes, in, bytes);
  ex.wait_all(recvs);
}

void scatter_direct(Exec& ex, const char* in, char* out, size_t count, int root) {
  int n = ex.size(), r = ex.rank();
  size_t bytes = count * ex.elem();
  if (r != root) {
    auto q = ex.recv(root, out, bytes);
    ex.wait(q);
    return;
  }
  std::vector<transport::Request> sends;
  for (int k = 0; k < n; ++k) {
    if (k != root) sends.push_back(ex.send(k, in + size_t(k) * bytes, bytes));
  }
  if (out != in + size_t(r) * bytes) std::memmove(out, in + size_t(r) * bytes, bytes);
  ex.wait_all(sends);
}

void alltoall_direct(Exec& ex, const char* in, char* out, size_t count) {
  int n = ex.size(), r = ex.rank();
  size_t bytes = count * ex.elem();
  std::vector<transport::Request> reqs;
  // Ordered by distance so that every rank talks to a different peer at each moment.
  for (int d = 1; d < n; ++d) {
    int to = (r + d) % n, from = (r - d + n) % n;
    reqs.push_back(ex.send(to, in + size_t(to) * bytes, bytes));
    reqs.push_back(ex.recv(from, out + size_t(from) * bytes, bytes));
  }
  std::memcpy(out + size_t(r) * bytes, in + size_t(r) * bytes, bytes);
  ex.wait_all(reqs);
}

}  // namespace cohort::comm::algo
