// The zero-copy limit of an allreduce on one host: what N processes achieve when every input
// and output already lies in one shared mapping, so nothing is staged or copied twice. Rank r
// sums segment r of all N inputs (fixed order) into its output piece by piece and writes each
// piece into every other rank's output while it is in cache; then all ranks meet (so no buffer
// is rewritten while a peer still reads it). Each byte of a segment crosses to a peer once.
// Out of place by default, like the allreduce the bench times; `--in-place 1` reduces into the
// inputs. (Until 2026-11-24 the probe was reduce-scatter + allgather: each rank copied the other
// segments out of their owners' outputs after a second meeting. cohort's allreduce then beat
// it by 1.3-2x at 256 KiB-2 MiB on 2 ranks, so it was no limit.) bench/run_collectives_bench.sh
// prints cohort's busbw as a share of it. Same columns as `cohort bench collectives` (time:
// median over iterations as seen by rank 0; busbw = algbw * 2(n-1)/n).
//
//   build/bin/shm_limit [-n 2] [--sizes 4K:64M] [--iters 20] [--warmup 5] [--in-place 0|1]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/sweep_args.h"

namespace {

// A sense-reversing barrier in the shared mapping. Waiters spin briefly, then yield, so that
// runs with more ranks than cores still progress.
struct Barrier {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  void wait(int n) {
    int gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
      arrived.store(0, std::memory_order_relaxed);
      generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    // A rank that died never arrives: give up after a minute instead of spinning forever.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int spins = 0; generation.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins <= 2000) continue;
      sched_yield();
      if (spins % 4096 == 0 && std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "shm_limit: a rank did not reach the barrier within 60 s\n");
        _exit(1);
      }
    }
  }
};

struct Shared {
  Barrier barrier;
  double times_us[4096];  // rank 0's per-iteration times
};

// Segment k of `count` floats split over n ranks: [begin, end).
size_t seg_begin(size_t count, int n, int k) {
  return count * size_t(k) / size_t(n);
}

void one_allreduce(float* const* ins, float* const* outs, size_t count, int n, int r, Barrier& b) {
  size_t lo = seg_begin(count, n, r), hi = seg_begin(count, n, r + 1);
  float* mine = outs[r];
  b.wait(n);  // every input is ready
  // Rank r's segment, in pieces that stay in L2: summed into its own output (rank order, as
  // the timed allreduce), then written into every other output while still in cache.
  constexpr size_t kPiece = 16384;  // floats: 64 KiB
  for (size_t a = lo; a < hi; a += kPiece) {
    size_t z = std::min(hi, a + kPiece);
    for (size_t i = a; i < z; ++i) mine[i] = ins[0][i] + ins[1][i];
    for (int k = 2; k < n; ++k) {
      for (size_t i = a; i < z; ++i) mine[i] += ins[k][i];
    }
    for (int k = 0; k < n; ++k) {
      if (k != r) std::memcpy(outs[k] + a, mine + a, (z - a) * sizeof(float));
    }
  }
  b.wait(n);  // every output is complete, and nobody reads an input any more
}

void rank_sweep(const bench::SweepArgs& a, int r, char* arena, Shared& sh) {
  int n = a.ranks;
  double factor = 2.0 * (n - 1) / n;
  for (size_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    std::vector<float*> ins(static_cast<size_t>(n)), outs(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      ins[size_t(k)] = reinterpret_cast<float*>(arena) + count * size_t(k);
      outs[size_t(k)] = a.in_place ? ins[size_t(k)] : ins[size_t(k)] + count * size_t(n);
    }
    std::fill(ins[size_t(r)], ins[size_t(r)] + count, 1.0f);
    for (int i = 0; i < a.warmup; ++i)
      one_allreduce(ins.data(), outs.data(), count, n, r, sh.barrier);
    for (int i = 0; i < a.iters; ++i) {
      auto start = std::chrono::steady_clock::now();
      one_allreduce(ins.data(), outs.data(), count, n, r, sh.barrier);
      std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - start;
      if (r == 0) sh.times_us[i] = us.count();
    }
    if (r == 0) {
      std::vector<double> t(sh.times_us, sh.times_us + a.iters);
      std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
      double us = t[t.size() / 2], algbw = double(bytes) / us / 1e3;
      std::printf("%12zu %12zu %6s %12.2f %12.3f %12.3f %8d\n", bytes, count, "f32", us, algbw,
                  algbw * factor, 0);
      std::fflush(stdout);
    }
    if (bytes > a.max_bytes / 2) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::SweepArgs a;
  if (!bench::parse_sweep_args(argc, argv, a, /*ranks_allowed=*/true) || a.iters > 4096) {
    std::fprintf(stderr,
                 "usage: shm_limit [-n RANKS] [--sizes MIN:MAX] [--iters I<=4096] "
                 "[--warmup W] [--in-place 0|1]\n");
    return 2;
  }
  size_t arena_bytes = 2 * a.max_bytes * size_t(a.ranks) + 4096;
  void* mem = mmap(nullptr, sizeof(Shared) + arena_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("shm_limit: mmap");
    return 1;
  }
  auto* sh = new (mem) Shared();
  char* arena = static_cast<char*>(mem) + sizeof(Shared);
  std::printf("# zero-copy limit: %d processes, one shared mapping, iters %d, warmup %d\n", a.ranks,
              a.iters, a.warmup);
  std::printf("%12s %12s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 1; r < a.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      rank_sweep(a, r, arena, *sh);
      _exit(0);
    }
    pids.push_back(pid);
  }
  rank_sweep(a, 0, arena, *sh);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed ? 1 : 0;
}
