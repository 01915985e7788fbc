#pragma once
// The trainer's view of the job: which rank it is and the process group its gradients are
// averaged over. Joined from the environment a launcher set (`cohort run`, `cohort train
// --workers`, torchrun, mpirun, srun: see rendezvous/bootstrap.h).
//
// A process started without any launcher variables is a job of one: no store, no group.
// comm.backend = "mpi" takes rank and size from MPI itself (the program was started by mpirun)
// and needs no store.
#include <chrono>
#include <memory>
#include <string>

#include "cohort/comm/init.h"
#include "cohort/comm/process_group.h"
#include "cohort/core/config.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::train {

struct TrainWorld {
  int rank = 0;
  int size = 1;
  int local_size = 1;
  int restart_count = 0;  // COHORT_RESTART_COUNT: attempts before this one (`--max-restarts`)
  std::unique_ptr<comm::World> native;        // native backend: store, communicator
  std::shared_ptr<comm::ProcessGroup> group;  // null for a job of one
  bool distributed() const { return group != nullptr; }
  bool is_chief() const { return rank == 0; }  // prints, logs evaluations, writes checkpoints
};

// Joins the job described by `env`. Collective over every rank when distributed. Errors
// (inconsistent variables, a peer that never arrives within comm.timeout_s) name the variable
// or rank.
std::unique_ptr<TrainWorld> join_world(const Config& cfg, const rendezvous::EnvMap& env);

}  // namespace cohort::train
