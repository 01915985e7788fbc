#!/usr/bin/python3
"""torch.distributed all_reduce on backend "cohort" or "gloo": one rank of the sweep of
bench/run_torch_backend_bench.sh, started by `cohort run -n N -- /usr/bin/python3 THIS --backend B`.

Prints (rank 0) the table of `cohort bench collectives` and bench/torch_gloo_allreduce.py
(size count type time algbw busbw #wrong), so one parser reads all of them: float32 sum,
sizes multiplied by --step from MIN to MAX, time = median over --iters of the slowest rank's
call (after --warmup untimed calls), busbw = algbw * 2(n-1)/n. Each timed call is a plain
blocking dist.all_reduce(t) on a tensor restored from its input beforehand (untimed, as in
torch_gloo_allreduce.py): what a torch program pays per call, the Python and c10d layers included.
"""
import argparse
import os
import sys
import time


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s and s[-1].upper() in mult else int(s)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["cohort", "gloo"], required=True)
    p.add_argument("--sizes", default="4K:64M")
    p.add_argument("--step", type=int, default=4, help="size factor between rows")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    lo, _, hi = a.sizes.partition(":")
    lo, hi = parse_size(lo), parse_size(hi or lo)
    if not 0 < lo <= hi or a.iters < 1 or a.warmup < 0 or a.step < 2:
        p.error("need 0 < MIN <= MAX, --iters >= 1, --warmup >= 0, --step >= 2")

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist
    if a.backend == "cohort":
        import cohort.torch  # noqa: F401  (registers the backend)
    else:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# torch {torch.__version__} backend {a.backend} all_reduce: {n} ranks, "
              f"iters {a.iters}, warmup {a.warmup}")
        print("%12s %12s %6s %12s %12s %12s %8s" % ("size(B)", "count", "type", "time(us)",
                                                   "algbw(GB/s)", "busbw(GB/s)", "#wrong"))
        sys.stdout.flush()
    bad = 0
    size = lo
    while size <= hi:
        count = size // 4
        idx = torch.arange(count, dtype=torch.int64) % 5
        inp = (idx + rank + 1).to(torch.float32)
        out = torch.empty_like(inp)
        for _ in range(a.warmup):
            out.copy_(inp)
            dist.all_reduce(out)
        times = torch.empty(a.iters, dtype=torch.float64)
        for i in range(a.iters):
            out.copy_(inp)
            t0 = time.perf_counter()
            dist.all_reduce(out)
            times[i] = (time.perf_counter() - t0) * 1e6
        want = (n * (n + 1) // 2 + n * idx).to(torch.float32)
        wrong = torch.tensor([int((out != want).sum())], dtype=torch.int64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)  # per iteration, the slowest rank
        dist.all_reduce(wrong)
        bad += int(wrong)
        if rank == 0:
            us = float(times.sort().values[a.iters // 2])  # upper median, as the C++ tables
            algbw = size / us / 1e3
            print("%12d %12d %6s %12.2f %12.3f %12.3f %8d" % (
                size, count, "f32", us, algbw, algbw * 2.0 * (n - 1) / n, int(wrong)), flush=True)
        size *= a.step
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(3 if bad else 0)


if __name__ == "__main__":
    main()
