#pragma once
// torchrun's variables for the workers of `cohort run`, so that a PyTorch program that calls
// torch.distributed.init_process_group() (init_method "env://") runs under cohort run unchanged:
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (node rank), GROUP_WORLD_SIZE
//   (nodes), ROLE_NAME=default, ROLE_RANK, ROLE_WORLD_SIZE (one role: the global values),
//   MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS.
// They come on top of cohort's own COHORT_* variables, which cohort's bootstrap reads first
// (bootstrap.h), so a cohort program still joins through the cohort store.
//
// MASTER_PORT is NOT the cohort store's port: PyTorch's rank 0 starts its own TCPStore server
// there (it speaks another protocol, without cohort's handshake), so it needs a port of its own.
// MASTER_ADDR is the cohort store's address: the address this job was told workers can reach.
// TORCHELASTIC_USE_AGENT_STORE is never set: there is no torch-protocol agent store to use.
// Internal to launch/.
#include <cstdint>
#include <string>

#include "cohort/launch/attempt.h"

namespace cohort::launch::detail {

// The key under which node 0's launcher publishes MASTER_PORT of attempt `restart` in the cohort
// store ("cohort/launch/attempt<k>/torch_master_port"). Its appearance is also what tells the
// other nodes that node 0 started that attempt (a restart across nodes).
std::string torch_port_key(int restart);

// A port that is free on `host` now: binds port 0 there, reads the port, closes the socket.
// Racy by nature: another process may take the port before PyTorch's rank 0 binds it (the
// window is the workers' start-up, well under a second); the job then fails with "address
// already in use" from rank 0, and --max-restarts picks a new port. IoError if host cannot be
// bound.
uint16_t pick_free_port(const std::string& host);

// MASTER_PORT for attempt `restart`. Single node: picked here (a new one per attempt).
// Multi-node: node 0 picks it and publishes it in the cohort store (at store_host:store_port);
// the other nodes' launchers read it from there, waiting up to `wait` for node 0 (and through
// node 0's restart of its store: a connection that closes is opened again). Returns 0 if the
// launcher got SIGINT/SIGTERM while waiting (*signal says which). Timeout if node 0 never
// publishes it.
uint16_t agree_torch_port(const LaunchOptions& options, const JobPlan& plan, uint16_t store_port,
                          int restart, SignalRelay& relay, std::chrono::milliseconds wait,
                          int* signal);

// Adds the variables above to `env` for the worker of `local_rank`.
void add_torch_env(rendezvous::EnvMap& env, const LaunchOptions& options, const JobPlan& plan,
                   int local_rank, int restart, uint16_t torch_port);

}  // namespace cohort::launch::detail
