"""PyTorch's own DistributedDataParallel trains the same MLP twice in one job, once over the
"cohort" world and once over a gloo group, from the same initial weights on the same batches;
the parameters afterwards must be equal: bit for bit at 2 ranks (a sum of two gradients is the
same in any order), within float tolerance at 3 (cohort and gloo add three in different
orders). Small buckets, so several allreduces overlap backward. Prints "ddp OK <max diff>".

Three variants, each on both backends: plain DDP with SGD; DDP with torch's fp16_compress_hook
(torch.distributed.algorithms); DDP with ZeroRedundancyOptimizer (Adam, its state sharded).

    ddp_vs_gloo.py [--steps K] [--variants plain,fp16_hook,zero]
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from _exit import finish, say
import cohort.torch  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--variants", default="plain,fp16_hook,zero")
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK, N = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")


def model():
    torch.manual_seed(0)  # the same start everywhere; DDP broadcasts rank 0's anyway
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def train(group, variant):
    net = DDP(model(), process_group=group, bucket_cap_mb=0.01)  # ~2.5k floats per bucket
    if variant == "fp16_hook":  # torch.distributed.algorithms: gradients all-reduced in float16
        net.register_comm_hook(group, default_hooks.fp16_compress_hook)
    if variant == "zero":  # each rank steps its shard of the optimizer state, then broadcasts
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.Adam,
                                      process_group=group, lr=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + RANK)  # each rank its own shard of data
    for _ in range(args.steps):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


failures, diffs = [], []
for variant in args.variants.split(","):
    cohort_params = train(dist.group.WORLD, variant)  # the default group: "cohort"
    gloo_params = train(GLOO, variant)
    # Every rank holds the same parameters (DDP's contract), checked through gloo.
    flat = torch.cat([p.flatten() for p in cohort_params])
    mine = flat.clone()
    dist.broadcast(flat, src=0, group=GLOO)
    agree = torch.equal(flat, mine)
    diff = max((a - b).abs().max().item() for a, b in zip(cohort_params, gloo_params))
    if N == 2:
        same = all(torch.equal(a, b) for a, b in zip(cohort_params, gloo_params))
    else:
        same = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6)
                   for a, b in zip(cohort_params, gloo_params))
    moved = max((a - b).abs().max().item() for a, b in zip(cohort_params, model().parameters()))
    if not (agree and same and moved > 1e-3):  # moved: training did something
        failures.append(f"{variant}: differs from gloo by {diff:g} (ranks agree: {agree}, "
                        f"moved {moved:g})")
    diffs.append(f"{variant} {diff:g}")
if failures:
    print(f"rank {RANK}:", *failures, sep="\n  ")
    finish(1)
say(f"ddp OK {', '.join(diffs)}")
finish(0)
