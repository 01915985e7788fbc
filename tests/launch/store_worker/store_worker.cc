// A worker for tests/launch: joins the store that `cohort run` hosts, counts itself in, and
// waits (with a deadline) until every rank has. Exits 0 on success, 1 with the reason on
// stderr otherwise.
//   --fail-first-attempt: rank 0 exits 7 after the rendezvous of attempt 0 (to test restarts;
//   the restarted attempt must see a fresh store, so the count never overshoots world_size).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/rendezvous/bootstrap.h"
#include "cohort/rendezvous/world_store.h"

namespace rdv = cohort::rendezvous;

int main(int argc, char** argv) {
  const bool fail_first = argc > 1 && std::strcmp(argv[1], "--fail-first-attempt") == 0;
  try {
    const rdv::EnvMap env = rdv::snapshot_environment();
    const rdv::WorldInfo world = rdv::world_from_env(env);
    COHORT_CHECK_ARG(env.count("COHORT_STORE_EXTERNAL") && env.at("COHORT_STORE_EXTERNAL") == "1",
                     "COHORT_STORE_EXTERNAL=1 is not set");
    const std::string restart =
        env.count("COHORT_RESTART_COUNT") ? env.at("COHORT_RESTART_COUNT") : std::string("(unset)");
    rdv::WorldStore ws =
        rdv::connect_world_store(world, {.host = rdv::StoreHost::kExternal,
                                         .timeout = std::chrono::seconds(10),
                                         .connect_timeout = std::chrono::seconds(10)});
    ws.store->add("n", 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int64_t n = 0;
    auto pause = std::chrono::milliseconds(1);
    while ((n = ws.store->add("n", 0)) < world.world_size) {
      COHORT_CHECK_T(std::chrono::steady_clock::now() < deadline, cohort::Timeout, "rank ",
                     world.rank, ": only ", n, " of ", world.world_size, " ranks arrived in 10 s");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
    COHORT_CHECK_ARG(n == world.world_size, "rank ", world.rank, ": counter reached ", n,
                     " > world size ", world.world_size, " (keys leaked from an earlier attempt)");
    std::printf("rank %d of %d joined (restart %s)\n", world.rank, world.world_size,
                restart.c_str());
    std::fflush(stdout);
    if (fail_first && world.rank == 0 && restart == "0") return 7;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_worker: %s\n", e.what());
    return 1;
  }
}
