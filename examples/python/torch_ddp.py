"""PyTorch's DistributedDataParallel on cohort's collectives: a torchrun + gloo training script
with one added import and the backend's name changed (docs/python.md, "A torch.distributed
backend").

    cmake --build build --target cohort_torch
    PYTHONPATH=build/python build/bin/cohort run -n 2 -- /usr/bin/python3 examples/python/torch_ddp.py
    PYTHONPATH=build/python torchrun --nproc_per_node 2 examples/python/torch_ddp.py
    ... torch_ddp.py --backend gloo      # the same run on gloo, to compare

Started without a launcher it is a world of one.
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import cohort.torch  # noqa: F401  registers the "cohort" backend

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="cohort")
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()

if "RANK" not in os.environ:  # no launcher: a world of one, its store on a free port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group(args.backend)
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)  # DDP broadcasts rank 0's weights anyway
model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

# A synthetic task: 4 classes, a linear rule; each rank draws its own shard of samples.
rule = torch.randn(20, 4, generator=torch.Generator().manual_seed(42))
data = torch.Generator().manual_seed(1000 + rank)
losses = []
for step in range(args.steps):
    x = torch.randn(32, 20, generator=data)
    y = (x @ rule).argmax(dim=1)
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
    opt.step()
    losses.append(loss.item())

# The mean loss over the ranks, first and last step (SUM then divide: gloo has no AVG).
both = torch.tensor([losses[0], losses[-1]])
dist.all_reduce(both)
both /= world
if rank == 0:
    print(f"{args.backend}: {world} ranks, {args.steps} steps, loss {both[0]:.3f} -> "
          f"{both[1]:.3f}", flush=True)
dist.destroy_process_group()
