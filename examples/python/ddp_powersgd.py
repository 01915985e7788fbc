"""PyTorch's DistributedDataParallel with cohort's PowerSGD hook: torch's powerSGD_hook example
with cohort.torch.hooks in its place (docs/python.md, "cohort's codecs as DDP comm hooks"), and
its checkpoint, hook state included.

    cmake --build build --target cohort_torch
    PYTHONPATH=build/python build/bin/cohort run -n 2 -- /usr/bin/python3 examples/python/ddp_powersgd.py
    ... ddp_powersgd.py --hook torch          # torch's own powerSGD_hook, to compare
    ... ddp_powersgd.py --backend gloo        # cohort's hook runs on gloo's group as well

Started without a launcher it is a world of one.
"""
import argparse
import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import cohort.torch  # noqa: F401  registers the "cohort" backend
from cohort.torch import hooks

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="cohort")
parser.add_argument("--hook", choices=["cohort", "torch"], default="cohort")
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--rank", type=int, default=2, help="PowerSGD's matrix_approximation_rank")
args = parser.parse_args()

if "RANK" not in os.environ:  # no launcher: a world of one, its store on a free port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group(args.backend)
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 4)))
# The same arguments for both: plain allreduce for 5 steps, then rank-r PowerSGD.
lib = hooks if args.hook == "cohort" else powerSGD_hook
state = lib.PowerSGDState(process_group=None, matrix_approximation_rank=args.rank,
                          start_powerSGD_iter=5)
model.register_comm_hook(state, hooks.powersgd if args.hook == "cohort"
                         else powerSGD_hook.powerSGD_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

rule = torch.randn(20, 4, generator=torch.Generator().manual_seed(42))
data = torch.Generator().manual_seed(1000 + rank)
losses = []
for step in range(args.steps):
    x = torch.randn(32, 20, generator=data)
    y = (x @ rule).argmax(dim=1)
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()  # the hook compresses and exchanges each bucket here
    opt.step()
    losses.append(loss.item())

# A checkpoint that resumes the hook too: its residuals, Qs and step counter.
if args.hook == "cohort":
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"ckpt_{rank}.pt")
        torch.save({"model": model.module.state_dict(), "optim": opt.state_dict(),
                    "hook": state.state_dict()}, path)
        state.load_state_dict(torch.load(path)["hook"])

both = torch.tensor([losses[0], losses[-1]])
dist.all_reduce(both)
both /= world
if rank == 0:
    print(f"{args.hook} powersgd on {args.backend}: {world} ranks, {args.steps} steps, loss "
          f"{both[0]:.3f} -> {both[1]:.3f}", flush=True)
dist.destroy_process_group()
