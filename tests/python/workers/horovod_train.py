"""DistributedOptimizer of cohort.torch.horovod on N real ranks against one process training
on the whole batch: each rank takes its slice of the same global batch, and after every step
the parameters must be identical on all ranks and equal (within `tol`) to single-process
training on the concatenated batch, because the average of the ranks' gradients of their mean
losses is the gradient of the mean loss over the global batch. Run by test_horovod.py under
`cohort run -n N`; exits non-zero on the first difference.

Variants: plain (several small buckets), bpps2 (backward_passes_per_step=2 against
accumulating 2 micro-batches), fp16 (Compression.fp16, to fp16's precision). Before training,
broadcast_parameters and broadcast_optimizer_state must make ranks that started apart
identical."""
import argparse
import copy
import os

import torch
import torch.nn as nn

import cohort.torch.horovod as hvd

B, D_IN, CLASSES = 8, 10, 3  # per rank and micro-batch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D_IN, 16), nn.Linear(16, CLASSES)
        self.unused = nn.Linear(4, 4)  # no gradient ever: its zeros must still be reduced

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).double() for t in tensors])


def same_on_all_ranks(t, what):
    rows = hvd.allgather(t.view(1, -1))
    for k in range(hvd.size()):
        if not torch.equal(rows[k], rows[0]):
            raise AssertionError(f"{what}: rank {k} differs from rank 0 by "
                                 f"{(rows[k] - rows[0]).abs().max():.3g}")


def global_batch(step, micro):
    g = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(hvd.size() * B, D_IN, generator=g)
    return x, torch.randint(0, CLASSES, (hvd.size() * B,), generator=g)


def broadcast_start(r):
    """Ranks start apart (weights, momentum, lr); the broadcasts must make them rank 0's."""
    torch.manual_seed(100 + r)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (r + 1), momentum=0.9)
    nn.functional.cross_entropy(model(torch.randn(B, D_IN)), torch.randint(0, 3, (B,))).backward()
    opt.step()
    opt.zero_grad()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.1, opt.param_groups[0]
    same_on_all_ranks(flat(model.parameters()), "parameters after broadcast_parameters")
    momenta = [opt.state[p]["momentum_buffer"] for p in model.parameters() if p in opt.state]
    assert len(momenta) == 4, len(momenta)
    same_on_all_ranks(flat(momenta), "momentum after broadcast_optimizer_state")
    return model, opt


def fresh_adam_state(r):
    """A new optimizer has no state yet: broadcast_optimizer_state creates it (Horovod's
    zero-gradient step) without moving the weights, then makes it rank 0's."""
    torch.manual_seed(7)
    model = nn.Linear(3, 2)
    before = flat(model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1), weight_decay=0.1)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert torch.equal(flat(model.parameters()), before), "the state-creating step moved weights"
    assert all(p.grad is None for p in model.parameters())
    assert opt.param_groups[0]["lr"] == 0.01 and "exp_avg" in opt.state[model.weight]


def train(variant, r, steps, tol):
    model, opt = broadcast_start(r)
    ref_model = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
    ref_opt.load_state_dict(opt.state_dict())
    passes = 2 if variant == "bpps2" else 1
    compression = hvd.Compression.fp16 if variant == "fp16" else hvd.Compression.none
    # plain: a bucket per ~64 floats, so several allreduces start during backward
    os.environ["HOROVOD_FUSION_THRESHOLD"] = "256" if variant == "plain" else str(4 << 20)
    dopt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                    compression=compression, backward_passes_per_step=passes)
    assert isinstance(dopt, torch.optim.SGD) and len(dopt._buckets) >= (3 if variant ==
                                                                        "plain" else 1)
    mine = slice(r * B, (r + 1) * B)
    for step in range(steps):
        dopt.zero_grad()
        ref_opt.zero_grad()
        for micro in range(passes):
            x, y = global_batch(step, micro)
            nn.functional.cross_entropy(model(x[mine]), y[mine]).backward()
            nn.functional.cross_entropy(ref_model(x), y).backward()
        # From step 1 on (buckets in backward's order by then), backward's hooks started every
        # bucket's allreduce but the last, the unused layer's, before step() asked for any.
        started = [b.handle is not None for b in dopt._buckets]
        assert step == 0 or sum(started) >= len(started) - 1, f"started in backward: {started}"
        dopt.step()
        ref_opt.step()
        got, want = flat(model.parameters()), flat(ref_model.parameters())
        same_on_all_ranks(got, f"{variant} parameters after step {step}")
        diff = (got - want).abs().max().item()
        if diff > tol:
            raise AssertionError(f"rank {r} {variant} step {step}: parameters differ from "
                                 f"single-process training on the global batch by {diff:.3g}")
    print(f"horovod train {variant} ok rank {r} of {hvd.size()}: max diff {diff:.2g}", flush=True)


def misuse(r):
    """Horovod's usage errors, with its messages."""
    model = Net()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    nn.functional.cross_entropy(model(torch.randn(B, D_IN)), torch.zeros(B).long()).backward()
    try:
        dopt.zero_grad()
    except AssertionError as e:
        assert "before optimizer.step() or optimizer.synchronize()" in str(e), e
    else:
        raise AssertionError("zero_grad between backward and step did not raise")
    try:
        nn.functional.cross_entropy(model(torch.randn(B, D_IN)), torch.zeros(B).long()).backward()
    except AssertionError as e:
        assert "more than backward_passes_per_step" in str(e), e
    else:
        raise AssertionError("a second backward before step did not raise")
    dopt.synchronize()  # every rank reduces the same buckets: the job goes on
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("a", model.fc1.weight)])
    except ValueError as e:
        assert "not named" in str(e), e
    else:
        raise AssertionError("unnamed parameters did not raise")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="plain,bpps2,fp16")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    r = hvd.rank()
    fresh_adam_state(r)
    for variant in args.variants.split(","):
        train(variant, r, args.steps, 2e-3 if variant == "fp16" else 1e-6)
    misuse(r)
    hvd.shutdown()


main()
