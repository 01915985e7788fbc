"""A hook's state survives a torch checkpoint: for every hook of cohort.torch.hooks, training
N steps, saving {"model", "optim", "hook": state.state_dict()}, restoring into fresh processes
and training M more gives the parameters of N + M steps straight, bit for bit (the "cohort"
backend, 2 ranks). Two jobs:

    hooks_checkpoint.py --phase save --dir D     N steps, checkpoint, M more (the straight run)
    hooks_checkpoint.py --phase resume --dir D   checkpoint restored, M steps, compared

The resume phase prints "resume OK <hooks>" per rank. PowerSGD starts compressing at step 3 of
N = 4, so its residuals, Qs and counter all matter; SGD with momentum, so the optimizer's do too.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import cohort.torch  # noqa: F401
from cohort.torch import hooks
from _exit import finish, say

parser = argparse.ArgumentParser()
parser.add_argument("--phase", choices=["save", "resume"], required=True)
parser.add_argument("--dir", required=True)
parser.add_argument("--before", type=int, default=4)  # N
parser.add_argument("--after", type=int, default=3)   # M
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK = dist.get_rank()

HOOKS = {
    "powersgd": (lambda: hooks.PowerSGDState(None, matrix_approximation_rank=2,
                                              start_powerSGD_iter=3), hooks.powersgd),
    "fp16": (lambda: hooks.HookState(None), hooks.fp16),
    "bf16": (lambda: hooks.HookState(None), hooks.bf16),
    "topk": (lambda: hooks.TopKState(None, ratio=0.05), hooks.topk),
    "qsgd": (lambda: hooks.QSGDState(None, levels=4, seed=11, use_error_feedback=True),
             hooks.qsgd),
}
STATEFUL = ("powersgd", "topk", "qsgd")  # fp16 and bf16 keep only the step counter


def setup(name):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, 10))
    ddp = DDP(net)
    make_state, hook = HOOKS[name]
    state = make_state()
    ddp.register_comm_hook(state, hook)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9), state


def steps(ddp, opt, first, count):
    for step in range(first, first + count):
        gen = torch.Generator().manual_seed(1000 * step + RANK)  # step t's batch, in any process
        x, y = torch.randn(32, 32, generator=gen), torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()


def path(name, what):
    return os.path.join(args.dir, f"{name}_{what}_{RANK}.pt")


def resume(name, with_hook_state):
    ddp, opt, state = setup(name)
    ckpt = torch.load(path(name, "ckpt"))
    ddp.module.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optim"])
    if with_hook_state:
        state.load_state_dict(ckpt["hook"])
    steps(ddp, opt, args.before, args.after)
    return [p.detach().clone() for p in ddp.parameters()]


def same(a, b):
    return all(torch.equal(u, v) for u, v in zip(a, b))


failures = []
for name in HOOKS:
    if args.phase == "save":
        ddp, opt, state = setup(name)
        steps(ddp, opt, 0, args.before)
        torch.save({"model": ddp.module.state_dict(), "optim": opt.state_dict(),
                    "hook": state.state_dict()}, path(name, "ckpt"))
        steps(ddp, opt, args.before, args.after)
        torch.save([p.detach() for p in ddp.parameters()], path(name, "straight"))
        continue
    straight = torch.load(path(name, "straight"))
    resumed = resume(name, True)
    if not same(resumed, straight):
        diff = max((a - b).abs().max().item() for a, b in zip(resumed, straight))
        failures.append(f"{name}: resumed differs from straight by {diff:g}")
    # The control: without its state a stateful hook must not match, or the comparison above
    # proves nothing about state_dict.
    if name in STATEFUL and same(resume(name, False), straight):
        failures.append(f"{name}: matches the straight run even without its state")

if failures:
    say(f"rank {RANK}: " + "; ".join(failures))
    finish(1)
say(f"{args.phase} OK {', '.join(HOOKS)}")
finish(0)
