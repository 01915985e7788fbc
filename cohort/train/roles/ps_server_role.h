#pragma once
// `cohort train` in the parameter-server role. The launcher (`--servers S`) starts S extra
// processes of the same command with COHORT_ROLE=server, COHORT_SERVER_INDEX=i,
// COHORT_NUM_SERVERS=S, COHORT_NUM_WORKERS=N and the store address and job secret workers get.
// Such a process builds the model from the config only for its parameters' names, shapes and
// initial values (deterministic from run.seed), serves its key range (ps/server.h) on loopback,
// publishes "host:port" in the store (ps::publish_server: a new generation per start), and
// returns once every worker said goodbye.
// Recovery: with ckpt.enabled the server checkpoints into <ckpt dir>/server-<i>/ every
// ckpt.every_steps (server.h); started again by the launcher after a failure
// (COHORT_SERVER_RESTARTS > 0) it restores its newest checkpoint and the workers replay.
#include "cohort/core/config.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::train {

// Whether this process was started as a parameter server (COHORT_ROLE=server).
bool is_server_role(const rendezvous::EnvMap& env);

// Serves until every worker finished. InvalidArgument naming a worker that left without
// goodbye or a missing variable; Timeout when no worker is heard from for ps.timeout_s
// (default comm.timeout_s).
void run_parameter_server(const Config& cfg, const rendezvous::EnvMap& env);

}  // namespace cohort::train
