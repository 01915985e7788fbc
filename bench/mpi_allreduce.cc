// Open MPI's MPI_Allreduce, the peer of `cohort bench collectives --op allreduce`: same sweep
// (sizes doubling), same inputs and check, same columns (time: median over iters of the slowest
// rank; busbw = algbw * 2(n-1)/n, as nccl-tests).
//
//   mpirun --allow-run-as-root --oversubscribe -n 2 --mca btl self,vader
//          build/bin/mpi_allreduce [--sizes 4K:64M] [--iters 20] [--warmup 5]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/sweep_args.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  bench::SweepArgs a;
  if (!bench::parse_sweep_args(argc, argv, a)) {
    if (rank == 0)
      std::fprintf(stderr, "usage: mpi_allreduce [--sizes MIN:MAX] [--iters I] [--warmup W]\n");
    MPI_Finalize();
    return 2;
  }
  double factor = 2.0 * (n - 1) / n;
  if (rank == 0) {
    std::printf("# MPI_Allreduce: %d ranks, iters %d, warmup %d\n", n, a.iters, a.warmup);
    std::printf("%12s %12s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  long long total_wrong = 0;
  for (size_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count, 0.0f);
    for (size_t i = 0; i < count; ++i) in[i] = float(rank + 1 + int(i % 5));
    for (int i = 0; i < a.warmup; ++i)
      MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<double> times(size_t(a.iters));
    for (double& t : times) {
      double start = MPI_Wtime();
      MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t = (MPI_Wtime() - start) * 1e6;
    }
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != float(n * (n + 1) / 2 + n * int(i % 5));
    MPI_Allreduce(MPI_IN_PLACE, times.data(), a.iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += wrong;
    if (rank == 0) {
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      double us = times[times.size() / 2];
      double algbw = double(count * sizeof(float)) / us / 1e3;
      std::printf("%12zu %12zu %6s %12.2f %12.3f %12.3f %8lld\n", count * sizeof(float), count,
                  "f32", us, algbw, algbw * factor, wrong);
      std::fflush(stdout);
    }
    if (bytes > a.max_bytes / 2) break;
  }
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 3;
}
