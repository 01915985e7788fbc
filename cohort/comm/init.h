#pragma once
// Joining the job: the world ProcessGroup of a process started by a launcher (`cohort run`,
// torchrun, mpirun, srun; see rendezvous/bootstrap.h for the variables each sets), over the
// backend asked for by name. This is the one place that chooses a backend: the native
// Communicator, or MPI where cohort was built with it (library cohort_comm_init, which links
// the optional cohort_comm_mpi).
//
//   auto world = cohort::init();                  // rank, size and a ProcessGroup
//   parallel::DDP ddp(model, world->group);
//   auto mpi = cohort::init({.backend = "mpi"});  // under mpirun: rank and size from MPI
//
// Native: rank 0 hosts the store unless the launcher does (COHORT_STORE_EXTERNAL=1, set by
// `cohort run`); either way every rank authenticates with the job secret. A process started
// without launcher variables is a world of one: a single-rank group, no sockets.
// MPI: MPI has wired the job (no store, no secret, no port); a program not started by mpirun
// is a world of one as well (singleton MPI).
//
// Who owns which "world" (each layer keeps only what it needs):
//   rendezvous::WorldInfo   what the launcher's environment says: rank, sizes, store address,
//                           secret (bootstrap.h);
//   rendezvous::WorldStore  the job's store: client, and rank 0's server (world_store.h);
//   comm::World             the joined job: rank, sizes, the world ProcessGroup, and what keeps
//                           the backend alive (this header);
//   train::TrainWorld       the trainer's view: a comm::World plus restart count and whether
//                           gradients are averaged (train/world.h).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/communicator.h"
#include "cohort/comm/process_group.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/world_store.h"

namespace cohort::comm {

struct JoinOptions {
  // "native" or "mpi" (available_backends() says which this build has).
  std::string backend = "native";
  // Deadline for every rank to arrive, and of each collective.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Native only. Data listener address; loopback unless told otherwise (multi-host: this
  // host's address).
  std::string bind_address = "127.0.0.1";
  std::string advertise_address;  // published to peers; empty: bind_address
  // Native only. Connect the job's store and learn rank and size, but form no communicator
  // (comm and group stay null): for processes that talk to services, not to each other
  // (parameter-server workers), so that one of them can restart alone.
  bool store_only = false;
  // Native only. Fault injection (transport.h) and the flight recorder's ring size
  // (flight_recorder.h). The ring is written to $COHORT_FLIGHT_DIR/rank<R>.json when an
  // operation fails, if the launcher set that variable (`cohort run` does, per attempt).
  transport::FaultInjection faults;
  size_t flight_recorder_size = 64;
};

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the processes on this host
  int local_size = 1;
  std::shared_ptr<ProcessGroup> group;  // every rank of the job; never null
  // Native backend only (empty for MPI): the store (rank 0's server stays alive with it; empty
  // for a world of one) and the Communicator under `group` (e.g. to calibrate its cost model).
  rendezvous::WorldStore store;
  std::shared_ptr<Communicator> comm;
  // Native backend: the options `comm` was (or, store only, would have been) made with; a
  // communicator formed later for this process (elastic training) starts from them.
  CommOptions options;
};

// The backends this build has, in a fixed order: "native", then "mpi" when built with MPI.
std::vector<std::string> available_backends();

// Collective over every rank of the job. InvalidArgument names a missing or inconsistent
// variable, or a backend that is unknown or not built (and which ones this build has);
// Timeout names the ranks that did not arrive.
std::unique_ptr<World> join_world(const rendezvous::EnvMap& env, const JoinOptions& options = {});

}  // namespace cohort::comm

namespace cohort {
// The public face (DESIGN.md): the world of this process, from its environment.
inline std::unique_ptr<comm::World> init(const comm::JoinOptions& options = {}) {
  return comm::join_world(rendezvous::snapshot_environment(), options);
}
}  // namespace cohort
