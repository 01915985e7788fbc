// ProcessGroup over MpiCommunicator: forwards each call to the overloads of mpi_backend.h and
// keeps the byte estimates documented in mpi_process_group.h.
#include "cohort/comm/backends/mpi/mpi_process_group.h"

#include <atomic>

#include "cohort/core/error.h"

namespace cohort::comm {
namespace {

class MpiProcessGroup final : public ProcessGroup {
 public:
  explicit MpiProcessGroup(std::shared_ptr<MpiCommunicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  const char* backend_name() const override { return "mpi"; }

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
    // Chain root -> root+1 -> ... -> root-1: all but the root receive, all but the tail send.
    uint64_t bytes = uint64_t(o.count) * dtype_size(o.dtype);
    int n = size(), tail = (o.root + n - 1) % n;
    if (rank() != o.root) received_ += bytes;
    if (rank() != tail) sent_ += bytes;
  }
  void allgather(const AllgatherOptions& o) override {
    comm::allgather(*c_, o);
    uint64_t bytes = uint64_t(size() - 1) * o.count * dtype_size(o.dtype);
    sent_ += bytes;
    received_ += bytes;
  }
  void barrier(std::chrono::milliseconds timeout) override {
    comm::barrier(*c_, {.timeout = timeout});
  }
  uint64_t bytes_sent() const override { return sent_.load(); }
  uint64_t bytes_received() const override { return received_.load(); }

 private:
  // Counted after a synchronous call succeeds (a failed one throws first) and when an
  // asynchronous one is issued.
  void count_allreduce(const AllreduceOptions& o) {
    uint64_t n = uint64_t(size());
    uint64_t bytes = 2 * (n - 1) * (uint64_t(o.count) * dtype_size(o.dtype)) / n;
    sent_ += bytes;
    received_ += bytes;
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
