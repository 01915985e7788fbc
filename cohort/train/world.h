#pragma once
// The trainer's view of the job: which rank it is and the process group its gradients are
// averaged over. Joined from the environment a launcher set (`cohort run`, `cohort train
// --workers`, torchrun, mpirun, srun: see rendezvous/bootstrap.h) over the backend of
// comm.backend, which comm::join_world (comm/init.h) chooses; train/ knows no backend.
//
// A process started without any launcher variables is a job of one: no store, no group.
// comm.backend = "mpi" takes rank and size from MPI itself (the program was started by mpirun)
// and needs no store.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cohort/comm/init.h"
#include "cohort/comm/liveness.h"
#include "cohort/comm/process_group.h"
#include "cohort/core/config.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::train {

struct TrainWorld {
  int rank = 0;  // of joined (0 and 1 without it); read all over the trainer
  int size = 1;
  // Which share of the data this rank trains on, out of how many: rank and size, except when
  // the model is split over ranks (parallel.pp, parallel.tp), whose pieces read the same data.
  int data_rank = 0;
  int data_size = 1;
  int restart_count = 0;  // COHORT_RESTART_COUNT: attempts before this one (`--max-restarts`)
  // COHORT_WORKER_RESTARTS: how often this worker alone was restarted (parameter-server jobs,
  // whose workers form no group: their strategy's world hook joins the store only).
  int worker_restarts = 0;
  // The job as comm/ joined it (either backend); null for a job of one started by hand.
  std::unique_ptr<comm::World> joined;
  // joined->group when gradients are averaged; null for a job of one (MPI keeps its group even
  // with one rank).
  std::shared_ptr<comm::ProcessGroup> group;
  // Beats for this worker and aborts `group`'s collectives when a peer stops beating
  // (elastic.detect_s; native backend). Declared after `joined`: it stops first.
  std::unique_ptr<comm::Liveness> liveness;
  std::string liveness_prefix;  // the store namespace its beats go to
  // Elastic training (train/elastic.h): the launcher's rank of each current rank (they differ
  // once the membership changed), and whether this worker was respawned to join a running job.
  std::vector<int> slots;
  bool joiner = false;
  bool distributed() const { return group != nullptr; }
  bool is_chief() const { return rank == 0; }  // prints, logs evaluations, writes checkpoints
};

// Joins the job described by `env`. Collective over every rank when distributed. Errors
// (inconsistent variables, a peer that never arrives within comm.timeout_s, a backend this
// build lacks) name the variable, rank or backend.
std::unique_ptr<TrainWorld> join_world(const Config& cfg, const rendezvous::EnvMap& env);

// comm.calibrate: the allreduce cost model of `c` from the cache (per world size and layout), or
// measured. Collective over `c`.
void calibrate(const Config& cfg, comm::Communicator& c, const rendezvous::EnvMap& env);

// elastic.detect_s: a watchdog beating for `w` and aborting its communicator when a peer stops
// (null when off, or without a native communicator). Generation g > 0 (after in-place recovery,
// train/elastic.h) beats under a namespace of its own; with elastic.min_workers the watchdog
// also aborts when the next membership round opens. Sets w.liveness_prefix.
std::unique_ptr<comm::Liveness> watch_liveness(const Config& cfg, TrainWorld& w, int generation);

}  // namespace cohort::train
