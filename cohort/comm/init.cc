// join_world: the one place that chooses a backend by name. Built into cohort_comm_init, which
// links cohort_comm_mpi when CMake built it; COHORT_HAVE_MPI (from that library) is the only
// `#if` on backends (DESIGN.md: one registration edge per backend).
#include "cohort/comm/init.h"

#include <algorithm>

#include "cohort/rendezvous/hash_store.h"
#if COHORT_HAVE_MPI
#include "cohort/comm/backends/mpi/mpi_process_group.h"
#endif

namespace cohort::comm {
namespace {

void join_native(const rendezvous::EnvMap& env, const JoinOptions& o, World& w) {
  CommOptions co;
  co.timeout = co.connect_timeout = o.timeout;
  co.device.bind_address = o.bind_address;
  co.device.advertise_address = o.advertise_address;
  co.prefix = "world";
  co.device.faults = o.faults;
  co.flight_recorder_size = o.flight_recorder_size;
  std::shared_ptr<rendezvous::Store> store;
  if (rendezvous::has_launcher_environment(env)) {
    rendezvous::WorldInfo info = rendezvous::world_from_env(env);
    w.rank = info.rank;
    w.size = info.world_size;
    w.local_rank = info.local_rank;
    w.local_size = info.local_world_size;
    co.device.secret = info.secret;
    auto flight_dir = env.find("COHORT_FLIGHT_DIR");
    if (flight_dir != env.end() && !flight_dir->second.empty())
      co.flight_dump_path = detail::str(flight_dir->second, "/rank", info.rank, ".json");
    auto external = env.find("COHORT_STORE_EXTERNAL");
    rendezvous::WorldStoreOptions so;
    so.host = external != env.end() && external->second == "1" ? rendezvous::StoreHost::kExternal
                                                               : rendezvous::StoreHost::kRank0;
    so.timeout = so.connect_timeout = o.timeout;
    w.store = rendezvous::connect_world_store(info, so);
    store = w.store.store;
    w.options = co;
    if (o.store_only) return;
  } else if (o.store_only) {
    return;
  } else {
    store = std::make_shared<rendezvous::HashStore>();  // a world of one talks to nobody
  }
  w.comm = Communicator::create(store, w.rank, w.size, co);
  w.group = make_process_group(w.comm);
}

// Rank and size come from MPI; the host-local ones from Open MPI's variables, if any.
void join_mpi(const rendezvous::EnvMap& env, const JoinOptions& o, World& w) {
#if COHORT_HAVE_MPI
  MpiOptions mo;
  mo.timeout = o.timeout;
  w.group = make_mpi_process_group(mo);
  w.rank = w.group->rank();
  w.size = w.group->size();
  w.local_rank = rendezvous::int_from_env(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  w.local_size = rendezvous::int_from_env(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
#endif
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> available_backends() {
#if COHORT_HAVE_MPI
  return {"native", "mpi"};
#else
  return {"native"};
#endif
}

std::unique_ptr<World> join_world(const rendezvous::EnvMap& env, const JoinOptions& o) {
  auto have = available_backends();
  bool built = std::find(have.begin(), have.end(), o.backend) != have.end();
  COHORT_CHECK_ARG(built || o.backend != "mpi",
                   "comm backend \"mpi\" is not available: this cohort was built without MPI "
                   "(CMake did not find it; install libopenmpi-dev and rebuild); this build "
                   "has: ",
                   joined(have));
  COHORT_CHECK_ARG(built, "comm backend \"", o.backend,
                   "\" is unknown; this build has: ", joined(have));
  auto w = std::make_unique<World>();
  if (o.backend == "mpi") {
    join_mpi(env, o, *w);
  } else {
    join_native(env, o, *w);
  }
  return w;
}

}  // namespace cohort::comm
