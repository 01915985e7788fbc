// The native ProcessGroup: each call forwards to the free function of collectives.h over the
// wrapped Communicator; sub-groups wrap the Communicator's own split/new_group.
#include "cohort/comm/process_group.h"

#include <algorithm>
#include <string>

#include "cohort/comm/collectives.h"

namespace cohort::comm {
namespace {

std::string list_text(const int32_t* ranks, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += detail::str(i ? ", " : "", ranks[i]);
  return s + "]";
}

class NativeProcessGroup final : public ProcessGroup {
 public:
  explicit NativeProcessGroup(std::shared_ptr<Communicator> c) : c_(std::move(c)) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  const char* backend_name() const override { return "native"; }

  void allreduce(const AllreduceOptions& o) override { comm::allreduce(*c_, o); }
  Work allreduce_async(const AllreduceOptions& o) override { return comm::allreduce_async(*c_, o); }
  void broadcast(const BroadcastOptions& o) override { comm::broadcast(*c_, o); }
  Work broadcast_async(const BroadcastOptions& o) override { return comm::broadcast_async(*c_, o); }
  void allgather(const AllgatherOptions& o) override { comm::allgather(*c_, o); }
  Work allgather_async(const AllgatherOptions& o) override { return comm::allgather_async(*c_, o); }
  void allgatherv(const AllgathervOptions& o) override { comm::allgatherv(*c_, o); }
  Work allgatherv_async(const AllgathervOptions& o) override {
    return comm::allgatherv_async(*c_, o);
  }
  void reduce_scatter(const ReduceScatterOptions& o) override { comm::reduce_scatter(*c_, o); }
  Work reduce_scatter_async(const ReduceScatterOptions& o) override {
    return comm::reduce_scatter_async(*c_, o);
  }
  void barrier(std::chrono::milliseconds timeout) override {
    comm::barrier(*c_, {.timeout = timeout});
  }

  void send(const SendOptions& o) override { comm::send(*c_, o); }
  Work send_async(const SendOptions& o) override { return comm::send_async(*c_, o); }
  void recv(const RecvOptions& o) override { comm::recv(*c_, o); }
  Work recv_async(const RecvOptions& o) override { return comm::recv_async(*c_, o); }
  void batch_send_recv(const std::vector<P2POp>& ops, std::chrono::milliseconds timeout) override {
    comm::batch_send_recv(*c_, ops, timeout);
  }
  Work batch_send_recv_async(const std::vector<P2POp>& ops,
                             std::chrono::milliseconds timeout) override {
    return comm::batch_send_recv_async(*c_, ops, timeout);
  }

  std::shared_ptr<ProcessGroup> split(int color, int key) override {
    return wrap(c_->split(color, key));
  }
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override {
    check_new_group_ranks(*this, ranks);
    return wrap(c_->new_group(ranks));
  }

  SharedBuffer alloc_shared(size_t bytes) override { return c_->alloc_shared(bytes); }
  uint64_t bytes_sent() const override { return c_->bytes_sent(); }
  uint64_t bytes_received() const override { return c_->bytes_received(); }

 private:
  static std::shared_ptr<ProcessGroup> wrap(std::shared_ptr<Communicator> c) {
    return c ? std::make_shared<NativeProcessGroup>(std::move(c)) : nullptr;
  }
  std::shared_ptr<Communicator> c_;
};

}  // namespace

int check_new_group_ranks(ProcessGroup& parent, const std::vector<int>& ranks) {
  const int me = parent.rank(), n = parent.size();
  // Lengths first, so that lists of different lengths are compared without a count mismatch.
  int64_t mine = int64_t(ranks.size());
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  parent.allgather({.input = &mine, .output = lengths.data(), .count = 1, .dtype = DType::i64});
  std::vector<int32_t> own(ranks.begin(), ranks.end());
  for (int r = 0; r < n; ++r) {
    if (lengths[size_t(r)] == mine) continue;
    throw CollectiveMismatch(detail::str("new_group on rank ", me, ": rank ", r, " passed ",
                                         lengths[size_t(r)], " ranks, this rank passed ", mine, " ",
                                         list_text(own.data(), own.size()),
                                         "; every rank must pass the same list"));
  }
  std::vector<int32_t> all(size_t(n) * own.size());
  parent.allgather(
      {.input = own.data(), .output = all.data(), .count = own.size(), .dtype = DType::i32});
  for (int r = 0; r < n; ++r) {
    const int32_t* theirs = all.data() + size_t(r) * own.size();
    if (std::equal(own.begin(), own.end(), theirs)) continue;
    throw CollectiveMismatch(detail::str("new_group on rank ", me, ": rank ", r, " passed ",
                                         list_text(theirs, own.size()), ", this rank passed ",
                                         list_text(own.data(), own.size()),
                                         "; every rank must pass the same list"));
  }
  COHORT_CHECK_ARG(!ranks.empty(), "new_group on rank ", me, ": the list of ranks is empty");
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    COHORT_CHECK_ARG(ranks[i] >= 0 && ranks[i] < n, "new_group on rank ", me, ": rank ", ranks[i],
                     " in ", list_text(own.data(), own.size()), " is not in [0, ", n, ")");
    COHORT_CHECK_ARG(
        std::find(ranks.begin(), ranks.begin() + long(i), ranks[i]) == ranks.begin() + long(i),
        "new_group on rank ", me, ": rank ", ranks[i], " is listed twice in ",
        list_text(own.data(), own.size()));
    if (ranks[i] == me) index = int(i);
  }
  return index;
}

ForwardingProcessGroup::ForwardingProcessGroup(std::shared_ptr<ProcessGroup> inner)
    : inner_(std::move(inner)) {
  COHORT_CHECK_ARG(inner_ != nullptr, "ForwardingProcessGroup: null inner group");
}

std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Communicator> comm) {
  COHORT_CHECK_ARG(comm != nullptr, "make_process_group: null communicator");
  return std::make_shared<NativeProcessGroup>(std::move(comm));
}

}  // namespace cohort::comm
