#pragma once
// Bootstrap: who am I in the job, and where is the store? Read from the environment that a
// launcher set, in any of four conventions (checked in this order; the first one present wins):
//
//   convention  rank / world size                     local rank / local size
//   cohort      COHORT_RANK, COHORT_WORLD_SIZE        COHORT_LOCAL_RANK, COHORT_LOCAL_WORLD_SIZE
//   torchrun    RANK, WORLD_SIZE                      LOCAL_RANK, LOCAL_WORLD_SIZE
//   Open MPI    OMPI_COMM_WORLD_RANK, _SIZE           OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE
//   SLURM       SLURM_PROCID, SLURM_NTASKS            SLURM_LOCALID, SLURM_NTASKS_PER_NODE (or
//                                                     SLURM_TASKS_PER_NODE with SLURM_NODEID)
//
// The store address: COHORT_MASTER_ADDR / COHORT_MASTER_PORT for cohort, MASTER_ADDR /
// MASTER_PORT for torchrun; Open MPI and SLURM do not provide one, so either pair is read there.
//
// The job secret (see auth.h): COHORT_JOB_SECRET (hex) or COHORT_JOB_SECRET_FILE (a file holding
// the hex), whatever the convention. A job without one is refused, unless the caller opts in to
// insecure mode (BootstrapOptions::secret_policy, or COHORT_ALLOW_INSECURE=1) AND the store is on
// loopback: that is for single-host tests only.
//
// Parsing takes an EnvMap, not getenv: snapshot_environment() is the one place that reads the
// process environment, and tests pass maps. Missing, malformed or inconsistent values throw
// InvalidArgument naming the variables and the convention.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "cohort/net/secret.h"

namespace cohort::rendezvous {

enum class EnvConvention { kCohort, kTorchrun, kOpenMpi, kSlurm };
const char* convention_name(EnvConvention c);  // "cohort", "torchrun", "Open MPI", "SLURM"

using EnvMap = std::map<std::string, std::string, std::less<>>;
// A copy of the process environment (the only getenv-like read in cohort's rendezvous).
EnvMap snapshot_environment();

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this host
  int local_world_size = 1;  // processes on this host
  std::string master_addr;   // where the TcpStoreServer listens
  uint16_t master_port = 0;
  net::Secret secret;  // empty only in insecure mode
  EnvConvention source = EnvConvention::kCohort;
};

struct BootstrapOptions {
  net::SecretPolicy secret_policy = net::SecretPolicy::kRequired;
};

// Throws InvalidArgument if no convention is present, or the one present is incomplete or
// inconsistent (rank >= world size, local size > world size, a port out of range, ...).
WorldInfo world_from_env(const EnvMap& env, const BootstrapOptions& options = {});
// Whether any convention's rank or world-size variable is present (a launcher started this
// process); world_from_env then parses it, or says what is missing.
bool has_launcher_environment(const EnvMap& env);
// The integer variable `name`, or `fallback` when it is not set. InvalidArgument naming the
// variable when it is set to something else than an integer.
int int_from_env(const EnvMap& env, std::string_view name, int fallback);
// The secret alone: COHORT_JOB_SECRET or COHORT_JOB_SECRET_FILE (not both). Empty if neither is
// set and the policy allows it.
net::Secret secret_from_env(const EnvMap& env, net::SecretPolicy policy);
// Tasks on node `node_id` from SLURM_TASKS_PER_NODE syntax, e.g. "2(x3),1": nodes 0-2 run 2,
// node 3 runs 1. InvalidArgument on bad syntax or a node id out of range.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);

}  // namespace cohort::rendezvous
