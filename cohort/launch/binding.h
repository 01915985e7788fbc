#pragma once
// Which CPU each local worker is pinned to (`cohort run --bind`, mpirun's --bind-to).
//
// Why pin: on a machine with as many cores as workers, an unpinned scheduler now and then runs
// two workers of the job on one core, and each exchange between them then waits for a context
// switch; a pinned worker also keeps its caches and its shared-memory waits can poll (the
// transport spins longer for a rank pinned to a core of its own, comm/transport/backoff.h).
// Measured on 2 cores, MLP at 2 workers (bench/run_ddp_bench.sh, with the shared-arena
// buckets): 58% of two independent processes unpinned, 68% pinned (docs/launch.md). With more
// workers than cores pinning would stack them, so `auto` leaves placement to the scheduler then, as
// mpirun does.
#include <string>
#include <vector>

namespace cohort::launch {

enum class Bind {
  // core when 2 or more local workers fit on the cores this launcher may use; else none. A
  // single worker is left alone: two independent one-worker jobs would both land on CPU 0.
  // Two concurrent multi-worker jobs on one machine stack the same way (as with mpirun's
  // default): give them --bind none.
  kAuto,
  kCore,  // worker i on the i-th usable CPU (InvalidArgument if there are fewer)
  kNone,  // no pinning
};

// "auto" | "core" | "none" -> Bind; InvalidArgument naming the value otherwise.
Bind parse_bind(const std::string& text);

// The CPU of each of `workers` local workers, or an empty list for no pinning. `usable` is the
// launcher's own CPUs (sched_getaffinity), in order.
std::vector<int> worker_cpus(Bind bind, int workers, const std::vector<int>& usable);

// The CPUs this process may run on, in increasing order.
std::vector<int> usable_cpus();

}  // namespace cohort::launch
