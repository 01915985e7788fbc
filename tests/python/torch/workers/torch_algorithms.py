"""torch.distributed.algorithms unchanged on the cohort backend: DDP with torch's own
powerSGD_hook, whose future callback waits for its second allreduce (the plugin completes
futures on a pool, python/torch_plugin/callback_pool.h; on the completion thread it hung),
against the same run on gloo. Prints "algorithms OK <max |cohort - gloo|>" per rank."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cohort.torch  # noqa: E402,F401
from _exit import finish, say  # noqa: E402


def train(group, steps):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)), process_group=group)
    state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                   start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
    model.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(100 + dist.get_rank())
    for _ in range(steps):
        x = torch.randn(16, 32, generator=data)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("cohort")
    on_cohort = train(None, a.steps)
    on_gloo = train(dist.new_group(backend="gloo"), a.steps)
    diff = (on_cohort - on_gloo).abs().max().item()
    say(f"algorithms OK {diff:.3g}" if diff < 1e-5 else f"algorithms DIFFER {diff:.3g}")
    finish(0)


if __name__ == "__main__":
    main()
