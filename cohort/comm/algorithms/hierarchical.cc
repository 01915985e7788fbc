// Hierarchical allreduce: chain reduce to each host's leader (shared memory), ring allreduce
// among the leaders (the only traffic that crosses hosts), broadcast within each host.
#include <algorithm>

#include "cohort/comm/algorithms/algorithms.h"
#include "cohort/comm/reduce.h"

namespace cohort::comm::algo {

// Position k-1 -> k-2 -> ... -> 0 of the current group, chunk by chunk: each position folds
// the incoming chunk into its own ("incoming op local") and forwards it as soon as it has
// arrived. Position 0 ends with x0 op (x1 op (... op x(k-1))), the same bits every run.
// avg combines like sum here; the caller divides.
void reduce_chain_to_first(Exec& ex, char* buf, size_t bytes, size_t chunk_bytes) {
  int n = ex.size(), v = ex.rank();
  if (n == 1 || bytes == 0) return;
  size_t per = std::max<size_t>(chunk_bytes / ex.elem(), 1) * ex.elem();
  std::vector<transport::Request> sends, recvs;
  if (v == n - 1) {
    for (size_t o = 0; o < bytes; o += per) {
      sends.push_back(ex.send(v - 1, buf + o, std::min(per, bytes - o)));
    }
    ex.wait_all(sends);
    return;
  }
  for (size_t o = 0; o < bytes; o += per) {
    recvs.push_back(ex.recv_reduce(v + 1, buf + o, std::min(per, bytes - o)));
  }
  size_t i = 0;
  for (size_t o = 0; o < bytes; o += per, ++i) {
    ex.wait(recvs[i]);
    if (v > 0) sends.push_back(ex.send(v - 1, buf + o, std::min(per, bytes - o)));
  }
  ex.wait_all(sends);
}

void allreduce_hierarchical(Exec& ex, char* buf, size_t count, const HostTopology& topo,
                            size_t chunk_bytes) {
  int world = ex.size(), rank = ex.rank();
  size_t bytes = count * ex.elem();
  const std::vector<int>& local = topo.local_ranks(rank);
  std::vector<int> leaders = topo.leaders();
  bool leader = local.front() == rank;

  ex.set_group(&local);
  reduce_chain_to_first(ex, buf, bytes, chunk_bytes);
  if (leader) {
    if (leaders.size() > 1) {
      ex.set_group(&leaders);
      Segments segs = Segments::even(count, int(leaders.size()));
      RingPass p;
      p.buf = buf;
      p.segments = &segs;
      p.first_step = 0;
      p.last_step = 2 * int(leaders.size()) - 2;
      p.chunk_bytes = chunk_bytes;
      ring_pass(ex, p);
    }
    // Every leader holds the same sum, so dividing here keeps the bits identical.
    if (ex.sig().reduce_op == ReduceOp::avg) divide_by(ex.sig().dtype, buf, count, world);
  }
  ex.set_group(&local);
  if (bytes <= chunk_bytes) {
    broadcast_tree(ex, buf, bytes, 0);
  } else {
    broadcast_chain(ex, buf, bytes, 0, chunk_bytes);
  }
  ex.set_group(nullptr);
}

}  // namespace cohort::comm::algo
