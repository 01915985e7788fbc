#include "cohort/comm/init.h"

#include "cohort/rendezvous/hash_store.h"

namespace cohort::comm {

std::unique_ptr<World> join_world(const rendezvous::EnvMap& env, const JoinOptions& o) {
  auto w = std::make_unique<World>();
  CommOptions co;
  co.timeout = co.connect_timeout = o.timeout;
  co.device.bind_address = o.bind_address;
  co.device.advertise_address = o.advertise_address;
  co.prefix = "world";
  std::shared_ptr<rendezvous::Store> store;
  if (rendezvous::has_launcher_environment(env)) {
    rendezvous::WorldInfo info = rendezvous::world_from_env(env);
    w->rank = info.rank;
    w->size = info.world_size;
    w->local_rank = info.local_rank;
    w->local_size = info.local_world_size;
    co.device.secret = info.secret;
    auto external = env.find("COHORT_STORE_EXTERNAL");
    rendezvous::WorldStoreOptions so;
    so.host = external != env.end() && external->second == "1" ? rendezvous::StoreHost::kExternal
                                                               : rendezvous::StoreHost::kRank0;
    so.timeout = so.connect_timeout = o.timeout;
    w->store = rendezvous::connect_world_store(info, so);
    store = w->store.store;
  } else {
    store = std::make_shared<rendezvous::HashStore>();  // a world of one talks to nobody
  }
  w->comm = Communicator::create(store, w->rank, w->size, co);
  w->group = make_process_group(w->comm);
  return w;
}

}  // namespace cohort::comm
