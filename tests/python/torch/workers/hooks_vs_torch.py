"""cohort.torch.hooks against torch's own hooks (torch.distributed.algorithms.ddp_comm_hooks) in
one job on the "cohort" backend: the same MLP, the same start and each rank's own fixed batch,
trained by DDP with each hook. Prints one "hooks OK ..." line per rank, or what failed.

  fp16, bf16   vs fp16_compress_hook / bf16_compress_hook: within 1e-6 (see test_hooks.py);
               the line says whether they were bit-identical.
  powersgd     vs powerSGD_hook (same rank, start iter, seed): within 2e-5 (float sums in
               another order: cohort's sgemm and Gram-Schmidt against torch's bmm), loss down.
  topk         the loss goes down; and, with integer gradients through a stand-in bucket (every
               sum exact in float32): sum over steps of what was sent + the residuals == the sum
               of the gradients, exactly, over every rank.
  qsgd         trained twice from the same seed: bit-identical (the draws are counter-based);
               the loss goes down.

    hooks_vs_torch.py [--steps K]
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import cohort.torch  # noqa: F401
from cohort.torch import hooks
from _exit import finish, say

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("cohort")
RANK, N = dist.get_rank(), dist.get_world_size()
# torch's powerSGD_hook waits for its next allreduce inside a future's callback, which hangs on
# the "cohort" backend (the callback runs on the thread that would complete it); it runs on
# gloo, whose sums of two floats are cohort's, bit for bit.
GLOO = dist.new_group(backend="gloo")


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def train(state, hook, steps=args.steps, lr=0.1, group=None):
    """(parameters, first loss, last loss) after `steps` DDP steps with the hook."""
    net = DDP(model(), process_group=group, bucket_cap_mb=0.01)  # several buckets
    net.register_comm_hook(state, hook)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + RANK)
    x, y = torch.randn(64, 32, generator=gen), torch.randint(0, 10, (64,), generator=gen)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [p.detach().clone() for p in net.parameters()], losses[0], losses[-1]


def max_diff(a, b):
    return max((u - v).abs().max().item() for u, v in zip(a, b))


failures, notes = [], []


def expect(ok, what):
    if not ok:
        failures.append(what)


def torch_bf16(state, bucket):
    """torch's bf16_compress_hook, which DDP refuses by name without CUDA 11 and NCCL 2.10."""
    return default_hooks.bf16_compress_hook(state, bucket)


# fp16 and bf16 against torch's hooks on the same backend.
for name, ours, theirs in (("fp16", hooks.fp16, default_hooks.fp16_compress_hook),
                           ("bf16", hooks.bf16, torch_bf16)):
    a, _, _ = train(None, ours)
    b, _, _ = train(None, theirs)
    d = max_diff(a, b)
    notes.append(f"{name} {'identical' if d == 0 else f'{d:.2g}'}")
    expect(d <= 1e-6, f"{name}: differs from torch's hook by {d:g}")

# PowerSGD against torch's powerSGD_hook.
psgd = dict(matrix_approximation_rank=2, start_powerSGD_iter=3)
a, first, last = train(hooks.PowerSGDState(None, **psgd), hooks.powersgd)
on_gloo, _, _ = train(hooks.PowerSGDState(GLOO, **psgd), hooks.powersgd, group=GLOO)
b, _, _ = train(powerSGD_hook.PowerSGDState(GLOO, **psgd), powerSGD_hook.powerSGD_hook,
                group=GLOO)
d = max_diff(a, b)
notes.append(f"powersgd {d:.2g} (loss {first:.3f} -> {last:.3f})")
expect(max_diff(a, on_gloo) == 0, f"powersgd: on gloo differs by {max_diff(a, on_gloo):g}, gloo vs torch {max_diff(on_gloo, b):g} cohort vs torch {d:g}")
expect(d <= 2e-5, f"powersgd: differs from torch's powerSGD_hook by {d:g}")
expect(last < first, f"powersgd: loss {first} -> {last}")

# top-k trains.
_, first, last = train(hooks.TopKState(None, ratio=0.1), hooks.topk)
expect(last < first, f"topk: loss {first} -> {last}")
notes.append(f"topk loss {first:.3f} -> {last:.3f}")


class Bucket:
    """A stand-in for dist.GradBucket: one bucket of two parameters."""

    def __init__(self, params, grads):
        self._params = params
        self._buf = torch.cat([g.reshape(-1) for g in grads])

    def buffer(self):
        return self._buf

    def index(self):
        return 0

    def is_last(self):
        return True

    def parameters(self):
        return self._params

    def gradients(self):
        return list(self._buf.split([p.numel() for p in self._params]))


# top-k's error feedback: nothing is lost. Integer gradients keep every sum exact; the hook's
# output is the mean of what the ranks sent, so world * sum(outputs) + sum over ranks of the
# residuals == sum over ranks and steps of the gradients.
params = [torch.zeros(5, 4), torch.zeros(7)]
state = hooks.TopKState(None, ratio=0.2)
gen = torch.Generator().manual_seed(7 + RANK)
sum_grads, sum_out = torch.zeros(27), torch.zeros(27)
for _ in range(6):
    grads = [torch.randint(-50, 50, p.shape, generator=gen).float() for p in params]
    bucket = Bucket(params, grads)
    sum_grads += bucket.buffer()
    sum_out += hooks.topk(state, bucket).wait()
residual = state.state_dict()["residuals"]
carried = torch.cat([residual[0].reshape(-1), residual[1].reshape(-1)])
expect(carried.abs().sum() > 0, "topk: no residual carried")
total = torch.stack([sum_grads, carried])
dist.all_reduce(total)
expect(torch.equal(N * sum_out + total[1], total[0]),
       f"topk: sent + residual != gradients (off by {(N * sum_out + total[1] - total[0]).abs().max()})")

# QSGD: reproducible, and it trains.
a, first, last = train(hooks.QSGDState(None, levels=8, seed=3), hooks.qsgd)
b, _, _ = train(hooks.QSGDState(None, levels=8, seed=3), hooks.qsgd)
expect(max_diff(a, b) == 0, f"qsgd: two runs from one seed differ by {max_diff(a, b):g}")
expect(last < first, f"qsgd: loss {first} -> {last}")
notes.append(f"qsgd loss {first:.3f} -> {last:.3f}")

if failures:
    say(f"rank {RANK}: " + "; ".join(failures))
    finish(1)
say(f"hooks OK {', '.join(notes)}")
finish(0)
