#!/usr/bin/python3
"""PyTorch peer of bench/op_profile.cc: forward and backward CPU ms of every op of one MLP and
one CNN training step (batch 64, one thread), each timed alone, plus the SGD step.

Backward is torch.autograd.grad over the op's sub-graph (the backward kernels, no .grad
accumulation), as op_profile.cc times grad_fn->apply. Times are medians over reps of process
CPU time.

  /usr/bin/python3 bench/torch_op_profile.py [--model mlp|cnn|all] [--reps N] [--batch B]
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
torch.set_flush_denormal(True)


def p(*shape, grad=True):
    return (0.05 * torch.randn(*shape)).requires_grad_(grad)


def profile(name, inputs, fn, reps, totals):
    fwd, bwd = [], []
    g = None
    for r in range(-3, reps):
        t0 = time.process_time()
        y = fn(*inputs)
        t1 = time.process_time()
        if g is None:
            g = torch.ones(()) if y.dim() == 0 else 0.01 * torch.randn(y.shape)
        wanted = [t for t in inputs if t.requires_grad]
        t2 = time.process_time()
        torch.autograd.grad(y, wanted, g)
        t3 = time.process_time()
        if r >= 0:
            fwd.append((t1 - t0) * 1e3)
            bwd.append((t3 - t2) * 1e3)
    f, b = statistics.median(fwd), statistics.median(bwd)
    totals[0] += f
    totals[1] += b
    print(f"{name:<34} {f:9.3f} {b:9.3f}")


def profile_sgd(shapes, reps):
    params = [p(*s) for s in shapes]
    for t in params:
        t.grad = 0.05 * torch.randn(t.shape)
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    ts = []
    for r in range(-3, reps):
        t0 = time.process_time()
        opt.step()
        if r >= 0:
            ts.append((time.process_time() - t0) * 1e3)
    print(f"{'sgd step (momentum; optimizer)':<34} {'':9} {statistics.median(ts):9.3f}")


def mlp_ops(b):
    y = torch.arange(b) * 7 % 10
    lin = F.linear
    return [
        ("fc1 linear 784->512 (no dx)", [p(b, 784, grad=False), p(512, 784), p(512)], lin),
        ("relu [B,512]", [p(b, 512)], F.relu),
        ("fc2 linear 512->256", [p(b, 512), p(256, 512), p(256)], lin),
        ("relu [B,256]", [p(b, 256)], F.relu),
        ("fc3 linear 256->10", [p(b, 256), p(10, 256), p(10)], lin),
        ("cross_entropy [B,10]", [p(b, 10)], lambda x: F.cross_entropy(x, y)),
    ], [(512, 784), (512,), (256, 512), (256,), (10, 256), (10,)]


def cnn_ops(b):
    y = torch.arange(b) * 7 % 10
    pool = lambda x: F.max_pool2d(x, 2)  # noqa: E731
    return [
        ("conv1 1->32 3x3 (no dx)", [p(b, 1, 28, 28, grad=False), p(32, 1, 3, 3), p(32)],
         F.conv2d),
        ("relu [B,32,26,26]", [p(b, 32, 26, 26)], F.relu),
        ("maxpool2 [B,32,26,26]", [p(b, 32, 26, 26)], pool),
        ("conv2 32->64 3x3", [p(b, 32, 13, 13), p(64, 32, 3, 3), p(64)], F.conv2d),
        ("relu [B,64,11,11]", [p(b, 64, 11, 11)], F.relu),
        ("maxpool2 [B,64,11,11]", [p(b, 64, 11, 11)], pool),
        ("fc1 linear 1600->128", [p(b, 1600), p(128, 1600), p(128)], F.linear),
        ("relu [B,128]", [p(b, 128)], F.relu),
        ("fc2 linear 128->10", [p(b, 128), p(10, 128), p(10)], F.linear),
        ("cross_entropy [B,10]", [p(b, 10)], lambda x: F.cross_entropy(x, y)),
    ], [(32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 1600), (128,), (10, 128), (10,)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn", "all"], default="all")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    for name, make in (("mlp", mlp_ops), ("cnn", cnn_ops)):
        if a.model not in ("all", name):
            continue
        ops, shapes = make(a.batch)
        print(f"\ntorch {torch.__version__} {name} (CPU ms, median of {a.reps})")
        print(f"{'op':<34} {'forward':>9} {'backward':>9}")
        totals = [0.0, 0.0]
        for op_name, inputs, fn in ops:
            profile(op_name, inputs, fn, a.reps, totals)
        profile_sgd(shapes, a.reps)
        print(f"{'total (ops)':<34} {totals[0]:9.3f} {totals[1]:9.3f}")


if __name__ == "__main__":
    main()
