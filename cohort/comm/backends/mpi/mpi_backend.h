#pragma once
// The MPI backend: the collectives of collectives.h over an MPI library (Open MPI), for
// clusters that already launch jobs with mpirun. Built as the optional library cohort_comm_mpi,
// only when CMake finds MPI; nothing outside cohort/comm/backends/mpi/ includes <mpi.h>.
//
//   auto world = comm::MpiCommunicator::create();     // MPI_Init on first use, dup of WORLD
//   comm::allreduce(*world, {.output = grad.data(), .count = n, .op = comm::ReduceOp::avg});
//   comm::Work w = comm::broadcast_async(*world, {.buffer = p, .count = n, .root = 0});
//   w.wait();
//
// The calls, options structs and Work are those of the native backend (collectives.h): each
// function below is an overload taking an MpiCommunicator&, so code written as a template over
// the communicator type runs on either. Differences, all because MPI decides them:
//   - Algorithm must be kAuto (Open MPI's tuned component chooses; force one with its
//     --mca coll_tuned_* parameters). Anything else is InvalidArgument.
//   - Counts (and allgatherv's total) must fit in an int, as MPI's do.
//   - Tags must be <= MPI_TAG_UB (at least 32767).
//   - f16/bf16 reduce through user-defined MPI ops that widen to float and round back, as the
//     native backend does; avg is a sum followed by a division, as in the native backend.
//   - No mismatch detection: ranks that disagree get whatever MPI does (usually a hang until
//     the deadline, or MPI_ERR_TRUNCATE).
//
// Deadlines: every call is posted as a non-blocking MPI operation and polled until its
// deadline (the call's timeout, else MpiOptions::timeout); past it, Timeout. A timed-out
// send/recv is cancelled; a timed-out collective cannot be cancelled in MPI, so its request is
// abandoned and its buffers may still be written later. After a Timeout or an error from MPI
// (MPI_ERRORS_RETURN is set on the communicator; errors become IoError naming the op and the
// rank) the communicator refuses further operations, as the native one does.
//
// Lifetime: the first create() calls MPI_Init_thread (asking for MPI_THREAD_MULTIPLE; with a
// lower level all MPI calls of this backend are serialized) unless the program already did, and
// then registers MPI_Finalize at exit. Destroy communicators before main returns.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/collectives.h"
#include "cohort/comm/work.h"

namespace cohort::comm {

struct MpiOptions {
  // Deadline of each operation (from when it starts running) unless the call passes its own.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // false: collectives are MPI's non-blocking calls (MPI_Iallreduce, ...) polled against the
  // deadline. true: MPI's blocking calls, which Open MPI serves with its tuned algorithms
  // (about 2x faster for large allreduce on this machine: 12.8 ms vs 27 ms for 16 MiB on 2
  // ranks) but with no deadline: a dead peer is then left to mpirun, which kills the job.
  // Point-to-point calls always keep their deadline. Must be the same on every rank.
  bool blocking_collectives = false;
};

class MpiCommunicator {
 public:
  // A duplicate of MPI_COMM_WORLD (collective over every process of the job).
  static std::shared_ptr<MpiCommunicator> create(MpiOptions options = {});
  ~MpiCommunicator();  // waits for queued asynchronous operations, then frees the MPI comm
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const MpiOptions& options() const { return options_; }

  // split: one group per colour (colour < 0: none, returns nullptr), ordered by (key, rank).
  // new_group: the listed ranks in that order; nullptr on ranks outside. Collective over this
  // communicator, called in the same order on every rank.
  std::shared_ptr<MpiCommunicator> split(int color, int key);
  std::shared_ptr<MpiCommunicator> new_group(const std::vector<int>& ranks);

  // --- used by the operations in mpi_collectives.cc ---
  struct Call;  // MPI-side state of one running operation (mpi_internal.h)
  struct Op {
    const char* kind = "";  // "allreduce"
    std::string what;       // "count=10, f32, sum"
    std::chrono::milliseconds timeout{0};
    std::function<void(Call&)> body;
  };
  void run(Op op);
  Work submit(Op op);

  struct Impl;  // the MPI_Comm and the worker thread (mpi_communicator.cc)

 private:
  explicit MpiCommunicator(std::unique_ptr<Impl> impl, MpiOptions options);
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  MpiOptions options_;
};

void allreduce(MpiCommunicator& c, const AllreduceOptions& o);
void broadcast(MpiCommunicator& c, const BroadcastOptions& o);
void reduce(MpiCommunicator& c, const ReduceOptions& o);
void allgather(MpiCommunicator& c, const AllgatherOptions& o);
void allgatherv(MpiCommunicator& c, const AllgathervOptions& o);
void reduce_scatter(MpiCommunicator& c, const ReduceScatterOptions& o);
void gather(MpiCommunicator& c, const GatherOptions& o);
void scatter(MpiCommunicator& c, const ScatterOptions& o);
void alltoall(MpiCommunicator& c, const AlltoallOptions& o);
void barrier(MpiCommunicator& c, const BarrierOptions& o = {});
void send(MpiCommunicator& c, const SendOptions& o);
void recv(MpiCommunicator& c, const RecvOptions& o);
void batch_send_recv(MpiCommunicator& c, const std::vector<P2POp>& ops, milliseconds timeout = {});

Work allreduce_async(MpiCommunicator& c, const AllreduceOptions& o);
Work broadcast_async(MpiCommunicator& c, const BroadcastOptions& o);
Work reduce_async(MpiCommunicator& c, const ReduceOptions& o);
Work allgather_async(MpiCommunicator& c, const AllgatherOptions& o);
Work allgatherv_async(MpiCommunicator& c, const AllgathervOptions& o);
Work reduce_scatter_async(MpiCommunicator& c, const ReduceScatterOptions& o);
Work gather_async(MpiCommunicator& c, const GatherOptions& o);
Work scatter_async(MpiCommunicator& c, const ScatterOptions& o);
Work alltoall_async(MpiCommunicator& c, const AlltoallOptions& o);
Work barrier_async(MpiCommunicator& c, const BarrierOptions& o = {});
Work send_async(MpiCommunicator& c, const SendOptions& o);
Work recv_async(MpiCommunicator& c, const RecvOptions& o);
Work batch_send_recv_async(MpiCommunicator& c, const std::vector<P2POp>& ops,
                           milliseconds timeout = {});

}  // namespace cohort::comm
