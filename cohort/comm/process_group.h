#pragma once
// ProcessGroup: the handful of collectives that training strategies (parallel/ddp, the trainer)
// need, behind one small interface, so the same training code runs over the native
// Communicator or over the MPI backend (config key comm.backend). Deliberately thin: only
// operations both backends implement fully, no "not supported" defaults. Code that needs more
// (sub-groups, alltoall, p2p) uses the concrete communicator.
//
// Semantics are those of collectives.h: same options structs, same errors, same Work.
#include <chrono>
#include <cstdint>
#include <memory>

#include "cohort/comm/collectives.h"
#include "cohort/comm/shared_buffer.h"

namespace cohort::comm {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend_name() const = 0;  // "native" or "mpi"

  virtual void allreduce(const AllreduceOptions& o) = 0;
  virtual Work allreduce_async(const AllreduceOptions& o) = 0;
  virtual void broadcast(const BroadcastOptions& o) = 0;
  virtual void allgather(const AllgatherOptions& o) = 0;
  virtual void barrier(std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) = 0;

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

// The native backend: wraps (and keeps alive) a Communicator.
std::shared_ptr<ProcessGroup> make_process_group(std::shared_ptr<Communicator> comm);

}  // namespace cohort::comm
