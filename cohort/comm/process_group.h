#pragma once
// ProcessGroup: the one network surface of training strategies (DDP, ZeRO, pipeline, tensor
// parallelism, parameter servers; DESIGN.md "one switch, one network surface"), so the same
// strategy runs over the native Communicator or over the MPI backend (comm.backend). Every
// operation is implemented fully by both backends; there are no "not supported" defaults.
//
//   auto pg = cohort::init()->group;                         // or make_process_group(comm)
//   pg->allreduce({.output = grad.data(), .count = n, .op = comm::ReduceOp::avg});
//   pg->reduce_scatter({.input = full.data(), .output = shard.data(), .count = n / pg->size()});
//   comm::Work w = pg->send_async({.buffer = act.data(), .count = n, .peer = next, .tag = 1});
//   auto stage = pg->split(/*color=*/pg->rank() / 2, /*key=*/pg->rank());  // a ProcessGroup too
//
// Semantics are those of collectives.h: the options structs of options.h, the same buffer
// rules, the same errors (InvalidArgument before anything is sent, CollectiveMismatch, Timeout,
// IoError, each naming the operation and the rank), and Work for asynchronous operations.
// Operations run in issue order; a synchronous one first waits for the asynchronous ones
// issued before it. Where MPI decides otherwise (algorithm must be kAuto, counts fit an int,
// mismatch detection) docs/comm.md says so.
//
// This header is light: it includes neither the native Communicator nor a transport.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "cohort/comm/options.h"
#include "cohort/comm/shared_buffer.h"
#include "cohort/comm/work.h"

namespace cohort::comm {

class Communicator;

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend_name() const = 0;  // "native" or "mpi"

  // Collectives: every rank of the group calls them in the same order.
  virtual void allreduce(const AllreduceOptions& o) = 0;
  virtual Work allreduce_async(const AllreduceOptions& o) = 0;
  virtual void broadcast(const BroadcastOptions& o) = 0;
  virtual Work broadcast_async(const BroadcastOptions& o) = 0;
  virtual void allgather(const AllgatherOptions& o) = 0;
  virtual Work allgather_async(const AllgatherOptions& o) = 0;
  // Blocks of counts[k] elements in rank order; counts identical on every rank.
  virtual void allgatherv(const AllgathervOptions& o) = 0;
  virtual Work allgatherv_async(const AllgathervOptions& o) = 0;
  // input: size() * count elements; block k, reduced over the ranks, lands on rank k.
  virtual void reduce_scatter(const ReduceScatterOptions& o) = 0;
  virtual Work reduce_scatter_async(const ReduceScatterOptions& o) = 0;
  virtual void barrier(std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) = 0;

  // Point-to-point: the n-th send from A to B with a tag matches the n-th recv on B from A;
  // count, dtype and tag must agree. `peer` is another rank of this group. Two ranks that both
  // send before receiving use batch_send_recv, which posts every operation at once and
  // completes them together (torch's batch_isend_irecv), so it cannot deadlock.
  virtual void send(const SendOptions& o) = 0;
  virtual Work send_async(const SendOptions& o) = 0;
  virtual void recv(const RecvOptions& o) = 0;
  virtual Work recv_async(const RecvOptions& o) = 0;
  virtual void batch_send_recv(const std::vector<P2POp>& ops,
                               std::chrono::milliseconds timeout = std::chrono::milliseconds{
                                   0}) = 0;
  virtual Work batch_send_recv_async(const std::vector<P2POp>& ops,
                                     std::chrono::milliseconds timeout = std::chrono::milliseconds{
                                         0}) = 0;

  // Sub-groups, ProcessGroups themselves (ranks renumbered from 0; every operation works,
  // further splits too). Collective: every rank of this group calls them in the same order.
  // split: MPI_Comm_split: one group per colour, ranked by (key, rank in this group); a
  //   negative colour joins none and gets nullptr.
  // new_group: torch's new_group: every rank passes the same list of distinct ranks; rank i of
  //   the new group is ranks[i]; ranks not listed get nullptr. A list that differs between ranks
  //   is a CollectiveMismatch naming both lists; a duplicate or out-of-range rank is an
  //   InvalidArgument, on every rank alike.
  virtual std::shared_ptr<ProcessGroup> split(int color, int key) = 0;
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) = 0;

  // Payload bytes sent to / received from peers so far (metrics). The native backend counts
  // what its transport moved; a backend that cannot see its wire reports its best estimate
  // (documented by the backend).
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;

  // Memory that collectives of this group move fastest (the native backend's shared arena,
  // shared_buffer.h): what DDP allocates its buckets from. Empty where the backend has none
  // (MPI, ranks on several hosts): use ordinary memory then.
  virtual SharedBuffer alloc_shared(size_t bytes) { return {}; }
};

// A ProcessGroup that forwards every call to `inner`: the base of decorators (tests that
// record or fail calls, metrics) that override only what they change.
class ForwardingProcessGroup : public ProcessGroup {
 public:
  explicit ForwardingProcessGroup(std::shared_ptr<ProcessGroup> inner);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const char* backend_name() const override { return inner_->backend_name(); }
  void allreduce(const AllreduceOptions& o) override { inner_->allreduce(o); }
  Work allreduce_async(const AllreduceOptions& o) override { return inner_->allreduce_async(o); }
  void broadcast(const BroadcastOptions& o) override { inner_->broadcast(o); }
  Work broadcast_async(const BroadcastOptions& o) override { return inner_->broadcast_async(o); }
  void allgather(const AllgatherOptions& o) override { inner_->allgather(o); }
  Work allgather_async(const AllgatherOptions& o) override { return inner_->allgather_async(o); }
  void allgatherv(const AllgathervOptions& o) override { inner_->allgatherv(o); }
  Work allgatherv_async(const AllgathervOptions& o) override { return inner_->allgatherv_async(o); }
  void reduce_scatter(const ReduceScatterOptions& o) override { inner_->reduce_scatter(o); }
  Work reduce_scatter_async(const ReduceScatterOptions& o) override {
    return inner_->reduce_scatter_async(o);
  }
  void barrier(std::chrono::milliseconds timeout) override { inner_->barrier(timeout); }
  void send(const SendOptions& o) override { inner_->send(o); }
  Work send_async(const SendOptions& o) override { return inner_->send_async(o); }
  void recv(const RecvOptions& o) override { inner_->recv(o); }
  Work recv_async(const RecvOptions& o) override { return inner_->recv_async(o); }
  void batch_send_recv(const std::vector<P2POp>& ops, std::chrono::milliseconds t) override {
    inner_->batch_send_recv(ops, t);
  }
  Work batch_send_recv_async(const std::vector<P2POp>& ops, std::chrono::milliseconds t) override {
    return inner_->batch_send_recv_async(ops, t);
  }
  std::shared_ptr<ProcessGroup> split(int color, int key) override {
    return inner_->split(color, key);
  }
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override {
    return inner_->new_group(ranks);
  }
  uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  uint64_t bytes_received() const override { return inner_->bytes_received(); }
  SharedBuffer alloc_shared(size_t bytes) override { return inner_->alloc_shared(bytes); }

 protected:
  ProcessGroup& inner() { return *inner_; }

 private:
  std::shared_ptr<ProcessGroup> inner_;
};

// What every backend's new_group does first (collective over `parent`): every rank learns
// every rank's list, then all throw the same error if the lists differ, name a rank twice or
// name one outside [0, parent.size()). Returns this rank's index in the list, -1 if absent.
int check_new_group_ranks(ProcessGroup& parent, const std::vector<int>& ranks);

// The native backend: wraps (and keeps alive) a Communicator (communicator.h). To choose the
// backend by name and join a launched job, see init.h.
std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Communicator> comm);

}  // namespace cohort::comm
