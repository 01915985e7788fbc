#!/usr/bin/python3
"""PyTorch counterpart of bench/train_bench.cc: the same models, batches, optimizer and timing.

A step is forward + cross entropy + zero_grad(set_to_none=True) + backward + SGD step
(lr 0.01, momentum 0.9) + loss.item(), cycling through fixed pre-built batches of
Fashion-MNIST-shaped data ([B, 1, 28, 28], 10 classes): with --batches FILE the very batches
train_bench wrote (`train_bench --save-batches FILE`), else Gaussian clusters made here the same
way. Each repeat times `steps` steps after `warmup` untimed ones. Denormals are flushed to zero
unless --denormals keep (see train_bench.cc for why).

Prints one human line per repeat on stderr and one JSON line per model on stdout, with
samples/s by wall clock and by process CPU time, as train_bench does:
  {"impl":"torch","model":"mlp",...,"median_samples_per_s":...,"median_cpu_samples_per_s":...}
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import os
import statistics
import struct
import sys
import time

FIXED_BATCHES = 16  # same as kFixedBatches in train_bench.cc
SEPARATION = 0.1  # same as kSeparation
LR = 0.01
MOMENTUM = 0.9


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn", "all"], default="all")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--denormals", choices=["flush", "keep"], default="flush")
    p.add_argument("--batches", metavar="FILE",
                   help="batches written by train_bench --save-batches")
    p.add_argument("--breakdown", action="store_true",
                   help="also report ms per step in forward, backward and optimizer")
    a = p.parse_args()
    for name in ("steps", "batch", "threads", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    return a


ARGS = parse_args()
# Thread counts must be in the environment before torch (and its OpenMP/MKL) loads.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_models import CNN, MLP  # noqa: E402  (bench/, beside this script)

torch.set_num_threads(ARGS.threads)
torch.set_num_interop_threads(1)
if ARGS.denormals == "flush" and not torch.set_flush_denormal(True):
    print("torch_train: this CPU cannot flush denormals", file=sys.stderr)


def load_batches(path, batch):
    """The file train_bench --save-batches writes: "CHTB", int32 count, batch, features, then
    per batch x float32 [B, features] and y int64 [B]."""
    with open(path, "rb") as f:
        data = bytearray(f.read())  # writable: torch.frombuffer warns on read-only buffers
    if data[:4] != b"CHTB":
        sys.exit(f"torch_train: {path} is not a train_bench batch file")
    count, b, features = struct.unpack_from("<3i", data, 4)
    if b != batch or features != 28 * 28:
        sys.exit(f"torch_train: {path} holds batches of {b} x {features}, "
                 f"expected {batch} x {28 * 28}")
    if len(data) != 16 + count * b * (4 * features + 8):
        sys.exit(f"torch_train: {path} is truncated ({len(data)} bytes for {count} batches)")
    out, off = [], 16
    for _ in range(count):
        x = torch.frombuffer(data, dtype=torch.float32, count=b * features, offset=off)
        off += 4 * b * features
        y = torch.frombuffer(data, dtype=torch.int64, count=b, offset=off)
        off += 8 * b
        out.append((x.reshape(b, 1, 28, 28).clone(), y.clone()))
    return out


def make_batches(batch):
    """Gaussian clusters: class centres ~ N(0, SEPARATION^2), samples = centre + N(0, 1)."""
    g = torch.Generator().manual_seed(1234)
    centres = SEPARATION * torch.randn(10, 1, 28, 28, generator=g)
    out = []
    for _ in range(FIXED_BATCHES):
        y = torch.randint(0, 10, (batch,), generator=g)
        x = centres[y] + torch.randn(batch, 1, 28, 28, generator=g)
        out.append((x.contiguous(), y))
    return out


def now():
    """(wall, process CPU) seconds: CPU time leaves out time spent preempted (see train_bench)."""
    return time.perf_counter(), time.process_time()


def train_step(model, opt, x, y, phases):
    if phases is not None:
        t0 = time.process_time()
    loss = F.cross_entropy(model(x), y)
    if phases is not None:
        t1 = time.process_time()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if phases is not None:
        t2 = time.process_time()
    opt.step()
    if phases is not None:
        phases[0] += t1 - t0
        phases[1] += t2 - t1
        phases[2] += time.process_time() - t2
    return loss.item()


def run_model(name, batches):
    torch.manual_seed(0)
    model = MLP() if name == "mlp" else CNN()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    a = ARGS
    wall_sps, cpu_sps, phases_all, loss, nxt = [], [], [], 0.0, 0
    for r in range(a.repeats):
        for _ in range(a.warmup):
            x, y = batches[nxt % len(batches)]
            nxt += 1
            loss = train_step(model, opt, x, y, None)
        phases = [0.0, 0.0, 0.0]
        w0, c0 = now()
        for _ in range(a.steps):
            x, y = batches[nxt % len(batches)]
            nxt += 1
            loss = train_step(model, opt, x, y, phases if a.breakdown else None)
        w1, c1 = now()
        wall_sps.append(a.steps * a.batch / (w1 - w0))
        cpu_sps.append(a.steps * a.batch / (c1 - c0))
        phases_all.append(phases)
        print(f"torch {name} repeat {r + 1}: {wall_sps[-1]:.1f} samples/s "
              f"({(w1 - w0) * 1e3 / a.steps:.3f} ms/step; by CPU time {cpu_sps[-1]:.1f}), "
              f"loss {loss:.4f}", file=sys.stderr)
    med = statistics.median
    print(f"torch {name} median: {med(wall_sps):.1f} samples/s (by CPU time {med(cpu_sps):.1f}) "
          f"over {a.repeats} repeats", file=sys.stderr)
    out = {"impl": "torch", "model": name, "batch": a.batch, "threads": a.threads,
           "steps": a.steps, "warmup": a.warmup, "denormals": a.denormals,
           "torch_version": torch.__version__,
           "samples_per_s": [round(v, 1) for v in wall_sps],
           "median_samples_per_s": round(med(wall_sps), 1),
           "cpu_samples_per_s": [round(v, 1) for v in cpu_sps],
           "median_cpu_samples_per_s": round(med(cpu_sps), 1),
           "final_loss": round(loss, 4)}
    if a.breakdown:
        out["cpu_ms_per_step"] = {
            k: round(med([p[i] for p in phases_all]) * 1e3 / a.steps, 3)
            for i, k in enumerate(("forward", "backward", "optimizer"))}
    print(json.dumps(out, separators=(",", ":")), flush=True)


def main():
    batches = load_batches(ARGS.batches, ARGS.batch) if ARGS.batches else make_batches(ARGS.batch)
    for m in ("mlp", "cnn"):
        if ARGS.model in ("all", m):
            run_model(m, batches)


if __name__ == "__main__":
    main()
