"""PyTorch's own DistributedDataParallel trains the same MLP twice in one job, once over the
"cohort" world and once over a gloo group, from the same initial weights on the same batches;
the parameters afterwards must be equal: bit for bit at 2 ranks (a sum of two gradients is the
same in any order), within float tolerance at 3 (cohort and gloo add three in different
orders). Small buckets, so several allreduces overlap backward. Prints "ddp OK <max diff>".

    ddp_vs_gloo.py [--steps K]
"""
import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import cohort.torch  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK, N = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")


def model():
    torch.manual_seed(0)  # the same start everywhere; DDP broadcasts rank 0's anyway
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def train(group):
    net = DDP(model(), process_group=group, bucket_cap_mb=0.01)  # ~2.5k floats per bucket
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + RANK)  # each rank its own shard of data
    for _ in range(args.steps):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


cohort_params = train(None)  # None: the default group, "cohort"
gloo_params = train(GLOO)

# Every rank holds the same parameters (DDP's contract), checked through gloo.
flat = torch.cat([p.flatten() for p in cohort_params])
mine = flat.clone()
dist.broadcast(flat, src=0, group=GLOO)
ok = torch.equal(flat, mine)
diff = max((a - b).abs().max().item() for a, b in zip(cohort_params, gloo_params))
if N == 2:
    ok = ok and all(torch.equal(a, b) for a, b in zip(cohort_params, gloo_params))
else:
    ok = ok and all(torch.allclose(a, b, rtol=1e-5, atol=1e-6)
                    for a, b in zip(cohort_params, gloo_params))
moved = max((a - b).abs().max().item() for a, b in zip(cohort_params, model().parameters()))
ok = ok and moved > 1e-3  # training did something
dist.destroy_process_group()
if not ok:
    print(f"rank {RANK}: DDP over cohort differs from gloo by {diff:g} (ranks agree: "
          f"{torch.equal(flat, mine)}, moved {moved:g})")
    sys.exit(1)
print(f"ddp OK {diff:g}", flush=True)
