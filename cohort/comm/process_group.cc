#include "cohort/comm/process_group.h"

namespace cohort::comm {
namespace {

class NativeProcessGroup final : public ProcessGroup {
 public:
  explicit NativeProcessGroup(std::shared_ptr<Communicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  const char* backend_name() const override { return "native"; }
  void allreduce(const AllreduceOptions& o) override { comm::allreduce(*c_, o); }
  Work allreduce_async(const AllreduceOptions& o) override { return comm::allreduce_async(*c_, o); }
  void broadcast(const BroadcastOptions& o) override { comm::broadcast(*c_, o); }
  void allgather(const AllgatherOptions& o) override { comm::allgather(*c_, o); }
  SharedBuffer alloc_shared(size_t bytes) override { return c_->alloc_shared(bytes); }
  void barrier(std::chrono::milliseconds timeout) override {
    comm::barrier(*c_, {.timeout = timeout});
  }
  uint64_t bytes_sent() const override { return c_->bytes_sent(); }
  uint64_t bytes_received() const override { return c_->bytes_received(); }

 private:
  std::shared_ptr<Communicator> c_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Communicator> comm) {
  COHORT_CHECK_ARG(comm != nullptr, "make_process_group: null communicator");
  return std::make_shared<NativeProcessGroup>(std::move(comm));
}

}  // namespace cohort::comm
