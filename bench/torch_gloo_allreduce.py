#!/usr/bin/python3
"""PyTorch gloo allreduce, the peer of `cohort bench collectives --op allreduce`.

Same sweep (sizes doubling), inputs, check and columns as cohort's table: time is the median
over iters of the slowest rank; busbw = algbw * 2(n-1)/n (nccl-tests). Ranks are spawned
processes on loopback (torch.multiprocessing), float32 sum, out of place (a fresh output from a
copy of the input, as an allreduce in torch is in place).

  /usr/bin/python3 bench/torch_gloo_allreduce.py -n 2 [--sizes 4K:64M] [--iters 20] [--warmup 5]
"""
import argparse
import os
import socket
import sys
import time


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sweep(lo, hi, step, iters, warmup, title):
    """The table of one rank of an initialised process group (rank 0 prints it): float32 sum,
    sizes from lo to hi times `step`, each row the upper median over iters of the slowest rank's
    call, the output checked. Also bench/torch_backend_allreduce.py's. Returns the wrong count."""
    import torch
    import torch.distributed as dist

    rank, n = dist.get_rank(), dist.get_world_size()
    factor = 2.0 * (n - 1) / n
    if rank == 0:
        print(f"# torch {torch.__version__} {title}: {n} ranks, iters {iters}, warmup {warmup}")
        print("%12s %12s %6s %12s %12s %12s %8s" % ("size(B)", "count", "type", "time(us)",
                                                   "algbw(GB/s)", "busbw(GB/s)", "#wrong"))
        sys.stdout.flush()
    total_wrong = 0
    size = lo
    while size <= hi:
        count = size // 4
        idx = torch.arange(count, dtype=torch.int64) % 5
        inp = (idx + rank + 1).to(torch.float32)
        out = torch.empty_like(inp)
        for _ in range(warmup):
            out.copy_(inp)
            dist.all_reduce(out)
        times = torch.empty(iters, dtype=torch.float64)
        for i in range(iters):
            out.copy_(inp)  # untimed: the in-place allreduce needs its input back
            start = time.perf_counter()
            dist.all_reduce(out)
            times[i] = (time.perf_counter() - start) * 1e6
        want = (n * (n + 1) // 2 + n * idx).to(torch.float32)
        wrong = torch.tensor([int((out != want).sum())], dtype=torch.int64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)  # per iteration, the slowest rank
        dist.all_reduce(wrong)
        total_wrong += int(wrong)
        if rank == 0:
            us = float(times.sort().values[iters // 2])  # upper median, as the C++ peers
            algbw = size / us / 1e3
            print("%12d %12d %6s %12.2f %12.3f %12.3f %8d" % (size, count, "f32", us, algbw,
                                                             algbw * factor, int(wrong)))
            sys.stdout.flush()
        size *= step
    dist.barrier()
    return total_wrong


def worker(rank, n, port, args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", rank=rank, world_size=n)
    lo, hi = args.sizes
    total_wrong = sweep(lo, hi, 2, args.iters, args.warmup, "gloo allreduce")
    dist.destroy_process_group()
    if total_wrong:
        sys.exit(3)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=2)
    p.add_argument("--sizes", default="4K:64M")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    lo, _, hi = args.sizes.partition(":")
    args.sizes = (parse_size(lo), parse_size(hi or lo))
    if args.n < 1 or args.sizes[0] <= 0 or args.sizes[0] > args.sizes[1] or args.iters < 1:
        p.error("need -n >= 1, 0 < MIN <= MAX in --sizes, --iters >= 1")
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(args.n, free_port(), args), nprocs=args.n, join=True)


if __name__ == "__main__":
    main()
