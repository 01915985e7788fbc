// Ring algorithms: allreduce, reduce-scatter, allgather(v), reduce (ring + gather).
#include <algorithm>
#include <cstring>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm::algo {

Segments Segments::even(size_t count, int n) {
  Segments s;
  size_t base = count / size_t(n), extra = count % size_t(n), off = 0;
  for (int i = 0; i < n; ++i) {
    size_t len = base + (size_t(i) < extra ? 1 : 0);
    s.offset.push_back(off);
    s.length.push_back(len);
    off += len;
  }
  return s;
}

Segments Segments::of(const std::vector<size_t>& lengths) {
  Segments s;
  size_t off = 0;
  for (size_t len : lengths) {
    s.offset.push_back(off);
    s.length.push_back(len);
    off += len;
  }
  return s;
}

namespace {

struct Chunk {
  size_t offset;  // bytes into the buffer
  size_t bytes;
};

// Chunks of segment `seg`: the same list on every rank, so senders and receivers agree.
std::vector<Chunk> chunks_of(const Segments& s, int seg, size_t elem, size_t chunk_bytes) {
  std::vector<Chunk> out;
  size_t per = std::max<size_t>(1, chunk_bytes / elem) * elem;
  size_t begin = s.offset[size_t(seg)] * elem, end = begin + s.length[size_t(seg)] * elem;
  for (size_t o = begin; o < end; o += per) out.push_back({o, std::min(per, end - o)});
  return out;
}

}  // namespace

// Step s sends segment (r - s - 1) to the right and receives segment (r - s - 2) from the left
// (mod n); the segment received at step s is the one sent at step s + 1, chunk by chunk.
void ring_pass(Exec& ex, const RingPass& p) {
  int n = ex.size(), r = ex.rank();
  if (n == 1 || p.first_step >= p.last_step) return;
  int right = (r + 1) % n, left = (r + n - 1) % n;
  size_t elem = ex.elem();
  auto seg = [&](int s, int shift) { return ((r - s - shift) % n + n) % n; };
  std::vector<transport::Request> sends;
  for (const Chunk& c : chunks_of(*p.segments, seg(p.first_step, 1), elem, p.chunk_bytes)) {
    sends.push_back(ex.send(right, p.buf + c.offset, c.bytes));
  }
  for (int s = p.first_step; s < p.last_step; ++s) {
    bool reducing = s < n - 1;
    auto chunks = chunks_of(*p.segments, seg(s, 2), elem, p.chunk_bytes);
    std::vector<transport::Request> recvs;
    recvs.reserve(chunks.size());
    for (const Chunk& c : chunks) {
      recvs.push_back(reducing ? ex.recv_reduce(left, p.buf + c.offset, c.bytes)
                               : ex.recv(left, p.buf + c.offset, c.bytes));
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      ex.wait(recvs[i]);
      if (s == n - 2 && p.finish_avg) {
        divide_by(ex.sig().dtype, p.buf + chunks[i].offset, chunks[i].bytes / elem, n);
      }
      if (s + 1 < p.last_step) {
        sends.push_back(ex.send(right, p.buf + chunks[i].offset, chunks[i].bytes));
      }
    }
  }
  ex.wait_all(sends);
}

void allreduce_ring(Exec& ex, char* buf, size_t count, size_t chunk_bytes) {
  int n = ex.size();
  Segments segs = Segments::even(count, n);
  RingPass p;
  p.buf = buf;
  p.segments = &segs;
  p.first_step = 0;
  p.last_step = 2 * n - 2;
  p.finish_avg = ex.sig().reduce_op == ReduceOp::avg;
  p.chunk_bytes = chunk_bytes;
  ring_pass(ex, p);
}

void reduce_scatter_ring(Exec& ex, const char* in, char* out, size_t count, size_t chunk_bytes) {
  int n = ex.size(), r = ex.rank();
  size_t elem = ex.elem(), total = count * size_t(n) * elem;
  char* work = ex.scratch(0, total);
  std::memcpy(work, in, total);
  Segments segs = Segments::even(count * size_t(n), n);
  RingPass p;
  p.buf = work;
  p.segments = &segs;
  p.first_step = 0;
  p.last_step = n - 1;
  p.finish_avg = ex.sig().reduce_op == ReduceOp::avg && n > 1;
  p.chunk_bytes = chunk_bytes;
  ring_pass(ex, p);
  std::memcpy(out, work + size_t(r) * count * elem, count * elem);
}

void allgather_ring(Exec& ex, char* buf, const Segments& segments, size_t chunk_bytes) {
  int n = ex.size();
  RingPass p;
  p.buf = buf;
  p.segments = &segments;
  p.first_step = n - 1;
  p.last_step = 2 * n - 2;
  p.chunk_bytes = chunk_bytes;
  ring_pass(ex, p);
}

void reduce_ring(Exec& ex, const char* in, char* out, size_t count, int root, size_t chunk_bytes) {
  int n = ex.size(), r = ex.rank();
  size_t elem = ex.elem(), total = count * elem;
  char* work = r == root ? out : ex.scratch(0, total);
  if (work != in) std::memmove(work, in, total);
  Segments segs = Segments::even(count, n);
  RingPass p;
  p.buf = work;
  p.segments = &segs;
  p.first_step = 0;
  p.last_step = n - 1;
  p.finish_avg = ex.sig().reduce_op == ReduceOp::avg;
  p.chunk_bytes = chunk_bytes;
  ring_pass(ex, p);
  // Rank k now owns segment k; the root collects them.
  auto bytes_of = [&](int k) { return segs.length[size_t(k)] * elem; };
  auto at = [&](int k) { return segs.offset[size_t(k)] * elem; };
  if (r != root) {
    if (bytes_of(r) == 0) return;
    auto q = ex.send(root, work + at(r), bytes_of(r));
    ex.wait(q);
    return;
  }
  std::vector<transport::Request> recvs;
  for (int k = 0; k < n; ++k) {
    if (k != root && bytes_of(k) > 0) recvs.push_back(ex.recv(k, out + at(k), bytes_of(k)));
  }
  ex.wait_all(recvs);
}

}  // namespace cohort::comm::algo
