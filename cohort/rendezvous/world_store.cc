#include "cohort/rendezvous/world_store.h"

namespace cohort::rendezvous {

WorldStore connect_world_store(const WorldInfo& world, const WorldStoreOptions& options) {
  // world_from_env already enforced the secret policy: an empty secret here was opted into.
  net::SecretPolicy policy =
      world.secret.empty() ? net::SecretPolicy::kAllowInsecure : net::SecretPolicy::kRequired;
  WorldStore out;
  if (options.host == StoreHost::kRank0 && world.rank == 0) {
    TcpStoreServerOptions so;
    so.host = world.master_addr;
    so.port = world.master_port;
    so.secret = world.secret;
    so.secret_policy = policy;
    out.server = std::make_unique<TcpStoreServer>(std::move(so));
  }
  TcpStoreOptions co;
  co.host = world.master_addr;
  co.port = world.master_port;
  co.secret = world.secret;
  co.secret_policy = policy;
  co.timeout = options.timeout;
  co.connect_timeout = options.connect_timeout;
  out.client = co;
  out.store = std::make_shared<TcpStore>(std::move(co));
  return out;
}

}  // namespace cohort::rendezvous
