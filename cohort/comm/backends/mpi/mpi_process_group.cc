// ProcessGroup over MpiCommunicator: forwards each call to the overloads of mpi_backend.h and
// keeps the byte estimates documented in mpi_process_group.h.
#include "cohort/comm/backends/mpi/mpi_process_group.h"

#include <atomic>
#include <vector>

#include "cohort/core/error.h"

namespace cohort::comm {
namespace {

// ProcessGroup asks every backend for the native backend's point-to-point rule: the peer is
// another rank (MPI alone would accept a message to oneself).
void check_peers(const char* op, const ProcessGroup& pg, const std::vector<P2POp>& ops) {
  COHORT_CHECK_ARG(!ops.empty(), op, " on rank ", pg.rank(), ": no operations");
  for (const P2POp& p : ops) {
    COHORT_CHECK_ARG(p.peer >= 0 && p.peer < pg.size() && p.peer != pg.rank(), op, " on rank ",
                     pg.rank(), ": peer ", p.peer, " must be another rank in [0, ", pg.size(), ")");
  }
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(std::shared_ptr<MpiCommunicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  const char* backend_name() const override { return "mpi"; }

  // Synchronous calls count after they succeed (a failed one throws first), asynchronous ones
  // when they are issued.
  void allreduce(const AllreduceOptions& o) override {
    comm::allreduce(*c_, o);
    count_allreduce(o);
  }
  Work allreduce_async(const AllreduceOptions& o) override {
    Work w = comm::allreduce_async(*c_, o);
    count_allreduce(o);
    return w;
  }
  void broadcast(const BroadcastOptions& o) override {
    comm::broadcast(*c_, o);
    count_broadcast(o);
  }
  Work broadcast_async(const BroadcastOptions& o) override {
    Work w = comm::broadcast_async(*c_, o);
    count_broadcast(o);
    return w;
  }
  void allgather(const AllgatherOptions& o) override {
    comm::allgather(*c_, o);
    count_ring(o.count, o.dtype);
  }
  Work allgather_async(const AllgatherOptions& o) override {
    Work w = comm::allgather_async(*c_, o);
    count_ring(o.count, o.dtype);
    return w;
  }
  void allgatherv(const AllgathervOptions& o) override {
    comm::allgatherv(*c_, o);
    count_allgatherv(o);
  }
  Work allgatherv_async(const AllgathervOptions& o) override {
    Work w = comm::allgatherv_async(*c_, o);
    count_allgatherv(o);
    return w;
  }
  void reduce_scatter(const ReduceScatterOptions& o) override {
    comm::reduce_scatter(*c_, o);
    count_ring(o.count, o.dtype);
  }
  Work reduce_scatter_async(const ReduceScatterOptions& o) override {
    Work w = comm::reduce_scatter_async(*c_, o);
    count_ring(o.count, o.dtype);
    return w;
  }
  void barrier(std::chrono::milliseconds timeout) override {
    comm::barrier(*c_, {.timeout = timeout});
  }

  void send(const SendOptions& o) override {
    check_peers("send", *this, {as_p2p(o)});
    comm::send(*c_, o);
    count_p2p({as_p2p(o)});
  }
  Work send_async(const SendOptions& o) override {
    check_peers("send", *this, {as_p2p(o)});
    Work w = comm::send_async(*c_, o);
    count_p2p({as_p2p(o)});
    return w;
  }
  void recv(const RecvOptions& o) override {
    check_peers("recv", *this, {as_p2p(o)});
    comm::recv(*c_, o);
    count_p2p({as_p2p(o)});
  }
  Work recv_async(const RecvOptions& o) override {
    check_peers("recv", *this, {as_p2p(o)});
    Work w = comm::recv_async(*c_, o);
    count_p2p({as_p2p(o)});
    return w;
  }
  void batch_send_recv(const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) override {
    check_peers("batch_send_recv", *this, ops);
    comm::batch_send_recv(*c_, ops, timeout);
    count_p2p(ops);
  }
  Work batch_send_recv_async(const std::vector<P2POp>& ops,
                             std::chrono::milliseconds timeout) override {
    check_peers("batch_send_recv", *this, ops);
    Work w = comm::batch_send_recv_async(*c_, ops, timeout);
    count_p2p(ops);
    return w;
  }

  std::shared_ptr<ProcessGroup> split(int color, int key) override {
    return wrap(c_->split(color, key));
  }
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override {
    check_new_group_ranks(*this, ranks);
    return wrap(c_->new_group(ranks));
  }

  uint64_t bytes_sent() const override { return sent_.load(); }
  uint64_t bytes_received() const override { return received_.load(); }

 private:
  static std::shared_ptr<ProcessGroup> wrap(std::shared_ptr<MpiCommunicator> c) {
    return c ? std::make_shared<MpiProcessGroup>(std::move(c)) : nullptr;
  }

  void count_allreduce(const AllreduceOptions& o) {
    uint64_t n = uint64_t(size());
    uint64_t bytes = 2 * (n - 1) * (uint64_t(o.count) * dtype_size(o.dtype)) / n;
    sent_ += bytes;
    received_ += bytes;
  }
  // Chain root -> root+1 -> ... -> root-1: all but the root receive, all but the tail send.
  void count_broadcast(const BroadcastOptions& o) {
    uint64_t bytes = uint64_t(o.count) * dtype_size(o.dtype);
    int n = size(), tail = (o.root + n - 1) % n;
    if (rank() != o.root) received_ += bytes;
    if (rank() != tail) sent_ += bytes;
  }
  // allgather and reduce_scatter: n - 1 blocks each way.
  void count_ring(size_t count, DType dtype) {
    uint64_t bytes = uint64_t(size() - 1) * count * dtype_size(dtype);
    sent_ += bytes;
    received_ += bytes;
  }
  // Ring allgatherv: every block but our own arrives; every block but our successor's leaves.
  void count_allgatherv(const AllgathervOptions& o) {
    uint64_t total = 0;
    for (size_t k : o.counts) total += k;
    size_t mine = size_t(rank()), next = size_t((rank() + 1) % size());
    received_ += (total - o.counts[mine]) * dtype_size(o.dtype);
    sent_ += (total - o.counts[next]) * dtype_size(o.dtype);
  }
  // Point-to-point: exactly the payload of every send and receive.
  void count_p2p(const std::vector<P2POp>& ops) {
    for (const P2POp& p : ops) {
      uint64_t bytes = uint64_t(p.count) * dtype_size(p.dtype);
      (p.kind == P2POp::kSend ? sent_ : received_) += bytes;
    }
  }

  std::shared_ptr<MpiCommunicator> c_;
  // Atomic: a metrics thread may read them while the training thread issues calls.
  std::atomic<uint64_t> sent_{0}, received_{0};
};

}  // namespace

std::shared_ptr<ProcessGroup> make_mpi_process_group(std::shared_ptr<MpiCommunicator> comm) {
  COHORT_CHECK_ARG(comm != nullptr, "make_mpi_process_group: null MPI communicator");
  return std::make_shared<MpiProcessGroup>(std::move(comm));
}

std::shared_ptr<ProcessGroup> make_mpi_process_group(MpiOptions options) {
  return make_mpi_process_group(MpiCommunicator::create(options));
}

}  // namespace cohort::comm
