#pragma once
// Collectives: free functions over an options struct (DESIGN convention 2, after gloo).
//
//   std::vector<float> grad(n);
//   comm::allreduce(*world, {.output = grad.data(), .count = n});       // in place, f32 sum
//   comm::Work w = comm::allreduce_async(*world, {.input = x, .output = y, .count = n,
//                                                 .dtype = comm::DType::bf16,
//                                                 .op = comm::ReduceOp::avg});
//   w.wait();
//
// The options structs, Algorithm and CollectiveMismatch are in options.h (with the buffer
// rules); kAuto picks by message size (CommOptions).
//
// Errors: InvalidArgument for bad arguments (before anything is sent); CollectiveMismatch when
// ranks disagree on the call; Timeout when a peer does not answer before the deadline; IoError
// when a peer dies or closes. Each names the operation, its sequence number and the peer.
// Results are bit-identical on every rank (see algorithms/algorithms.h).
#include <chrono>
#include <cstddef>
#include <vector>

#include "cohort/comm/communicator.h"
#include "cohort/comm/options.h"
#include "cohort/comm/types.h"
#include "cohort/comm/work.h"

namespace cohort::comm {

void allreduce(Communicator& c, const AllreduceOptions& o);
void broadcast(Communicator& c, const BroadcastOptions& o);
void reduce(Communicator& c, const ReduceOptions& o);
void allgather(Communicator& c, const AllgatherOptions& o);
void allgatherv(Communicator& c, const AllgathervOptions& o);
void reduce_scatter(Communicator& c, const ReduceScatterOptions& o);
void gather(Communicator& c, const GatherOptions& o);
void scatter(Communicator& c, const ScatterOptions& o);
void alltoall(Communicator& c, const AlltoallOptions& o);
void barrier(Communicator& c, const BarrierOptions& o = {});

Work allreduce_async(Communicator& c, const AllreduceOptions& o);
Work broadcast_async(Communicator& c, const BroadcastOptions& o);
Work reduce_async(Communicator& c, const ReduceOptions& o);
Work allgather_async(Communicator& c, const AllgatherOptions& o);
Work allgatherv_async(Communicator& c, const AllgathervOptions& o);
Work reduce_scatter_async(Communicator& c, const ReduceScatterOptions& o);
Work gather_async(Communicator& c, const GatherOptions& o);
Work scatter_async(Communicator& c, const ScatterOptions& o);
Work alltoall_async(Communicator& c, const AlltoallOptions& o);
Work barrier_async(Communicator& c, const BarrierOptions& o = {});

// Point-to-point. The n-th send from A to B is matched with the n-th recv on B from A; count,
// dtype and tag must agree (else CollectiveMismatch). Collectives and point-to-point messages
// between two ranks must be issued in the same relative order on both. A send completes when
// its data is in the transport's buffer (1 MiB shm ring, socket buffers), so two ranks that
// both send large messages before receiving must use batch_send_recv.
void send(Communicator& c, const SendOptions& o);
void recv(Communicator& c, const RecvOptions& o);
Work send_async(Communicator& c, const SendOptions& o);
Work recv_async(Communicator& c, const RecvOptions& o);

// Several sends and receives posted together and completed together (like
// torch.distributed.batch_isend_irecv): the way to exchange messages of any size with peers
// that also send to us, since separately issued operations run one after another.
void batch_send_recv(Communicator& c, const std::vector<P2POp>& ops, milliseconds timeout = {});
Work batch_send_recv_async(Communicator& c, const std::vector<P2POp>& ops,
                           milliseconds timeout = {});

// The algorithm kAuto resolves to for an allreduce of `bytes` (exposed for tests and tools).
Algorithm choose_allreduce_algorithm(const Communicator& c, size_t bytes);

}  // namespace cohort::comm
