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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gloo_allreduce import parse_size, sweep  # noqa: E402  one sweep for both peers


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
    bad = sweep(lo, hi, a.step, a.iters, a.warmup, f"backend {a.backend} all_reduce")
    dist.destroy_process_group()
    sys.exit(3 if bad else 0)


if __name__ == "__main__":
    main()
