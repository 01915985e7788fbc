#pragma once
// How many processes of this job share this host, read from whichever launcher started us; the
// intra-op thread pool divides the cores by it (thread_pool.h), so that N workers on one host
// do not each take every core.
//
// core/ sits below rendezvous/ (whose world_from_env reads the rank and world as well), so the
// thread default cannot ask it; this is the one place that reads the local-size variables for
// that purpose. Checked in this order, the first one set to a positive count wins:
//
//   COHORT_LOCAL_WORLD_SIZE      cohort run / cohort train --workers
//   LOCAL_WORLD_SIZE             torchrun
//   OMPI_COMM_WORLD_LOCAL_SIZE   Open MPI's mpirun
//   MPI_LOCALNRANKS              MPICH / Hydra's mpiexec
//   SLURM_STEP_TASKS_PER_NODE    srun: this step's tasks per node ("2(x3),1"), this node's entry
//                                picked by SLURM_NODEID (0 when unset)
//   SLURM_NTASKS_PER_NODE        sbatch/srun --ntasks-per-node
//
// A variable that is set but malformed is skipped (the next one is tried): a thread count is a
// default, not worth refusing to start over; world_from_env reports malformed launcher
// variables with their names.
#include <functional>
#include <optional>
#include <string_view>

namespace cohort {

// Returns the variable's value, or nullptr when it is not set (std::getenv's contract), so that
// tests can pass a map instead of changing the process environment.
using EnvLookup = std::function<const char*(const char* name)>;

// Processes of this job on this host per the table above; 1 when none of the variables is set.
int local_workers_from_env(const EnvLookup& lookup);
// The same, from the process environment.
int local_workers_from_env();

// Tasks on node `node_id` from SLURM's per-node syntax, e.g. "2(x3),1": nodes 0-2 run 2 tasks,
// node 3 runs 1. nullopt on bad syntax or a node beyond the list.
std::optional<int> slurm_tasks_on_node_or_none(std::string_view spec, int node_id);

}  // namespace cohort
