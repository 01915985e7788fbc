#pragma once
// The intra-op thread pool: kernels split loops over it with parallel_for.
//
// One pool per process, like torch.set_num_threads: threads are a process resource, not
// per-communicator state (see docs/architecture.md). The default size is the number of cores
// divided by the number of local workers (local_workers.h: cohort's, torchrun's, Open MPI's,
// MPICH's or SLURM's variables), so that N workers on one host do not oversubscribe it.
#include <cstdint>
#include <functional>

namespace cohort {

// Threads used by parallel_for, the calling thread included. Always >= 1.
int num_threads();
// Resizes the pool. n <= 0 restores the default. Not to be called from inside parallel_for.
void set_num_threads(int n);
// cores / local workers, at least 1.
int default_num_threads();

// Calls fn(lo, hi) over disjoint sub-ranges covering [begin, end), each at least `grain` long
// (but the last). Chunk boundaries depend only on (begin, end, grain, num_threads()), so a
// kernel that reduces per chunk is deterministic for a given thread count. Runs inline when the
// range is small, when there is one thread, or when called from inside another parallel_for.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace cohort
