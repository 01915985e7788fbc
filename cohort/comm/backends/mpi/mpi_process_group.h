#pragma once
// The MPI backend behind comm::ProcessGroup (process_group.h), so training code written against
// ProcessGroup runs over Open MPI when the config says comm.backend = "mpi".
//
//   auto pg = comm::make_mpi_process_group();   // MPI_Init on first use; dup of MPI_COMM_WORLD
//   pg->allreduce({.output = grad.data(), .count = n, .op = comm::ReduceOp::avg});
//
// Only in the optional library cohort_comm_mpi (whose users see COHORT_HAVE_MPI=1). Programs
// usually choose it by name instead, with comm::join_world / cohort::init({.backend = "mpi"})
// (init.h, library cohort_comm_init): the one place that knows whether this build has MPI.
//
// bytes_sent()/bytes_received() are ESTIMATES: MPI hides its wire (its algorithm, segmentation
// and shared-memory copies), so each collective adds what the ring algorithms of the native
// backend would move for the payload it hands to MPI, the same on every rank:
//   allreduce       2(n-1)/n * bytes sent and the same received;
//   broadcast       bytes received on every rank but the root, bytes sent on every rank but
//                   the last of the chain root -> root+1 -> ... (job totals: (n-1) * bytes);
//   allgather,      (n-1) * count * dtype size sent and the same received;
//   reduce_scatter
//   allgatherv      every block but this rank's received, every block but the next rank's
//                   sent;
//   send/recv       exactly the payload (batches: the sum of their sends and receives);
//   barrier, split nothing (new_group: the allgathers that compare every rank's list).
// A call is counted when it is issued (async ones too), whether or not it later succeeds.
// Sub-groups count their own calls from zero.
//
// Point-to-point follows the native rules: the peer must be another rank of the group, and a
// message shorter than the receive is a CollectiveMismatch (a longer one an IoError from MPI).
#include <memory>

#include "cohort/comm/backends/mpi/mpi_backend.h"
#include "cohort/comm/process_group.h"

namespace cohort::comm {

// A new communicator (MpiCommunicator::create(options): collective over every process of the
// job) wrapped as a ProcessGroup. backend_name() is "mpi".
std::shared_ptr<ProcessGroup> make_mpi_process_group(MpiOptions options = {});
// Wraps (and keeps alive) an existing MPI communicator, e.g. a split of the world.
std::shared_ptr<ProcessGroup> make_mpi_process_group(std::shared_ptr<MpiCommunicator> comm);

}  // namespace cohort::comm
