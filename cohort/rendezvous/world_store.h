#pragma once
// The job's store from a WorldInfo (bootstrap.h): rank 0 hosts the TcpStoreServer on
// master_addr:master_port when asked to (torchrun-style), every rank connects a TcpStore to it.
// Then ranks publish OS-chosen ports and the like through it; nothing else is hard-coded.
#include <memory>

#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/tcp_store.h"
#include "cohort/rendezvous/tcp_store_server.h"

namespace cohort::rendezvous {

// Who runs the server at master_addr:master_port.
enum class StoreHost {
  kRank0,     // rank 0 starts it, bound to master_addr (loopback stays loopback)
  kExternal,  // the launcher (`cohort run`) already runs it
};

struct WorldStoreOptions {
  StoreHost host = StoreHost::kRank0;
  Millis timeout = std::chrono::seconds(300);          // the store's default deadline
  Millis connect_timeout = std::chrono::seconds(300);  // ranks may start minutes apart
};

struct WorldStore {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 with StoreHost::kRank0 only
  std::shared_ptr<Store> store;
  // How `store` was connected: a watchdog opens a connection of its own with a shorter deadline
  // (comm/liveness.h), so that a cut link is named in seconds, not at the store's timeout.
  TcpStoreOptions client;
};

// `server` must outlive every client of the job:
// rank 0 keeps the WorldStore alive until the job's final barrier.
WorldStore connect_world_store(const WorldInfo& world, const WorldStoreOptions& options = {});

}  // namespace cohort::rendezvous
