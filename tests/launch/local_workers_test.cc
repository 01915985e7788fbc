// The thread default's view of "how many workers share this host" under each launcher
// (cohort/core/local_workers.h). Lives with the launch tests: it is the launchers' variables it
// reads. The environment is a map passed as the lookup; the process's own is never changed.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cohort/core/local_workers.h"

namespace cohort {
namespace {

int local_workers(const std::map<std::string, std::string>& env) {
  return local_workers_from_env([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LocalWorkers, NoLauncherMeansOne) {
  EXPECT_EQ(local_workers({}), 1);
}

TEST(LocalWorkers, EachLauncherIsRead) {
  EXPECT_EQ(local_workers({{"COHORT_LOCAL_WORLD_SIZE", "3"}}), 3);
  EXPECT_EQ(local_workers({{"LOCAL_WORLD_SIZE", "4"}}), 4);                 // torchrun
  EXPECT_EQ(local_workers({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}), 2);       // mpirun (Open MPI)
  EXPECT_EQ(local_workers({{"MPI_LOCALNRANKS", "5"}}), 5);                  // mpiexec (Hydra)
  EXPECT_EQ(local_workers({{"SLURM_NTASKS_PER_NODE", "6"}}), 6);            // --ntasks-per-node
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}}), 2);  // srun, node 0
}

TEST(LocalWorkers, SlurmStepPicksThisNodesEntry) {
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "2"}}), 2);
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}}), 1);
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2,1"}, {"SLURM_NODEID", "1"}}), 1);
  // The step's layout wins over the job's request: srun -n 3 inside --ntasks-per-node=4.
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "3"}, {"SLURM_NTASKS_PER_NODE", "4"}}), 3);
}

TEST(LocalWorkers, TheLaunchersOwnCountWinsOverAnOuterJobs) {
  // cohort train --workers 2 inside an srun step: the cohort launcher's count is the one.
  EXPECT_EQ(local_workers({{"COHORT_LOCAL_WORLD_SIZE", "2"},
                           {"LOCAL_WORLD_SIZE", "2"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                           {"SLURM_STEP_TASKS_PER_NODE", "16"}}),
            2);
  EXPECT_EQ(local_workers({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"SLURM_NTASKS_PER_NODE", "8"}}),
            2);
}

TEST(LocalWorkers, MalformedValuesFallThroughToTheNext) {
  EXPECT_EQ(local_workers({{"COHORT_LOCAL_WORLD_SIZE", "0"}, {"LOCAL_WORLD_SIZE", "2"}}), 2);
  EXPECT_EQ(local_workers({{"OMPI_COMM_WORLD_LOCAL_SIZE", "two"}, {"MPI_LOCALNRANKS", "3"}}), 3);
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2(3)"}, {"SLURM_NTASKS_PER_NODE", "4"}}),
            4);
  // A node beyond the step's list: the step does not say; the request does.
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "2"},
                           {"SLURM_NODEID", "1"},
                           {"SLURM_NTASKS_PER_NODE", "4"}}),
            4);
  EXPECT_EQ(local_workers({{"SLURM_STEP_TASKS_PER_NODE", "x"}}), 1);
}

TEST(LocalWorkers, SlurmSyntax) {
  EXPECT_EQ(slurm_tasks_on_node_or_none("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2(x0)", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2(x3", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node_or_none("", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node_or_none("2,", 1), std::nullopt);
}

}  // namespace
}  // namespace cohort
