#pragma once
// Joining the job: the world communicator of a process started by a launcher (`cohort run`,
// torchrun, mpirun, srun; see rendezvous/bootstrap.h for the variables each sets).
//
//   auto world = cohort::init();                  // rank, size and a ProcessGroup
//   parallel::DDP ddp(model, world->group);
//
// Rank 0 hosts the store unless the launcher does (COHORT_STORE_EXTERNAL=1, set by
// `cohort run`); either way every rank authenticates with the job secret. A process started
// without launcher variables is a world of one: a single-rank group, no sockets.
#include <chrono>
#include <memory>
#include <string>

#include "cohort/comm/communicator.h"
#include "cohort/comm/process_group.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/world_store.h"

namespace cohort::comm {

struct JoinOptions {
  // Deadline for every rank to arrive, and of each collective.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Data listener address; loopback unless told otherwise (multi-host: this host's address).
  std::string bind_address = "127.0.0.1";
  std::string advertise_address;  // published to peers; empty: bind_address
};

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  rendezvous::WorldStore store;  // keeps rank 0's store server alive; empty for a world of one
  std::shared_ptr<Communicator> comm;
  std::shared_ptr<ProcessGroup> group;
};

// Collective over every rank of the job. InvalidArgument names a missing or inconsistent
// variable; Timeout names the ranks that did not arrive.
std::unique_ptr<World> join_world(const rendezvous::EnvMap& env, const JoinOptions& options = {});

}  // namespace cohort::comm

namespace cohort {
// The public face (DESIGN.md): the world of this process, from its environment.
inline std::unique_ptr<comm::World> init(const comm::JoinOptions& options = {}) {
  return comm::join_world(rendezvous::snapshot_environment(), options);
}
}  // namespace cohort
