#!/usr/bin/python3
"""PyTorch DDP over gloo, the peer of `cohort train examples/fashion_<model>.toml --workers N`.

W processes on one host (torch.multiprocessing spawn, gloo over loopback TCP on a free port),
one thread each, train the model of bench/torch_models.py on the real Fashion-MNIST train set:
DistributedSampler (shuffled, seed 0, a new order each epoch), a batch of --batch per rank,
inputs standardised as cohort does (mean 0.2860, std 0.3530), cross entropy, SGD with the lr
and momentum of examples/fashion_<model>.toml (or --config). A step is: index the batch out of
the preloaded train set, forward, loss, zero_grad(set_to_none=True), backward (DDP allreduces
the gradient buckets during it), SGD step, loss.item().

With --workers 1 the model runs plain in this process (no process group, no DDP wrapper) unless
--single ddp asks for DDP with a world of 1.

Each rank runs --warmup untimed steps, meets the others at a barrier, then runs --steps timed
steps. samples/s counts all ranks together: workers * batch * steps / rank 0's wall time.
Prints one JSON line on stdout (rank 0), a human line on stderr:

  /usr/bin/python3 bench/torch_ddp.py --model mlp --workers 2 --steps 600
  {"impl":"torch","model":"mlp","workers":2,"ddp":true,...,"samples_per_s":...}
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time
import tomllib

# One thread per rank: the environment must say so before torch (OpenMP, MKL) loads, here and
# in the spawned ranks (they inherit it).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = "/usr/share/datasets/fashion-mnist/"  # as bench/torch_fashion_accuracy.py
MEAN, STD = 0.2860, 0.3530  # cohort's data.mean / data.std defaults


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--config", help="TOML with [optim] lr/momentum "
                   "(default examples/fashion_<model>.toml)")
    p.add_argument("--single", choices=["plain", "ddp"], default="plain",
                   help="with --workers 1: a plain model, or DDP with a world of 1")
    p.add_argument("--data-dir", default=DATA_DIR)
    a = p.parse_args()
    for name in ("workers", "steps", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    cfg = a.config or os.path.join(ROOT, "examples", f"fashion_{a.model}.toml")
    with open(cfg, "rb") as f:
        optim = tomllib.load(f).get("optim", {})
    if optim.get("name", "sgd") != "sgd":
        p.error(f"{cfg}: [optim] name is {optim['name']!r}; this peer implements sgd only")
    a.lr, a.momentum = float(optim.get("lr", 0.01)), float(optim.get("momentum", 0.0))
    a.config = cfg
    return a


def load_train(data_dir):
    """The train split as (x float32 [60000, 1, 28, 28] standardised, y int64 [60000])."""
    def idx(name, offset):
        path = os.path.join(data_dir, name)
        if not os.path.exists(path):
            sys.exit(f"torch_ddp: {path} not found (Fashion-MNIST IDX files; --data-dir)")
        with gzip.open(path) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)

    import torch
    x = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
    y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy((x / 255.0 - MEAN) / STD), torch.from_numpy(y)


def batches(n, rank, world, batch):
    """Index batches of rank's DistributedSampler shard, epoch after epoch (full batches only)."""
    from torch.utils.data.distributed import DistributedSampler
    sampler = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=0)
    import torch
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.int64)
        for i in range(0, len(order) - batch + 1, batch):
            yield order[i:i + batch]
        epoch += 1


def worker(rank, world, port, a, queue):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_models import MODELS

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    use_ddp = world > 1 or a.single == "ddp"
    if use_ddp:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway
    model = MODELS[a.model]()
    model.train()
    net = torch.nn.parallel.DistributedDataParallel(model) if use_ddp else model
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    x_all, y_all = load_train(a.data_dir)
    it = batches(len(y_all), rank, world, a.batch)

    def step():
        b = next(it)
        x, y = x_all[b], y_all[b]
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    if use_ddp:
        dist.barrier()
    w0 = time.perf_counter()
    loss = 0.0
    for _ in range(a.steps):
        loss = step()
    seconds = time.perf_counter() - w0
    if use_ddp:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        queue.put({"seconds": seconds, "final_loss": loss,
                   "torch_version": torch.__version__})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    if a.workers == 1 and a.single == "plain":
        worker(0, 1, 0, a, queue)
    else:
        mp.spawn(worker, args=(a.workers, free_port(), a, queue), nprocs=a.workers, join=True)
    r = queue.get()
    sps = a.workers * a.batch * a.steps / r["seconds"]
    ddp = a.workers > 1 or a.single == "ddp"
    print(f"torch {a.model} {a.workers} worker(s){' DDP gloo' if ddp else ' plain'}: "
          f"{sps:.1f} samples/s ({r['seconds'] * 1e3 / a.steps:.3f} ms/step), "
          f"loss {r['final_loss']:.4f}", file=sys.stderr)
    out = {"impl": "torch", "model": a.model, "workers": a.workers, "ddp": ddp,
           "backend": "gloo" if ddp else None, "batch": a.batch, "threads": 1,
           "steps": a.steps, "warmup": a.warmup, "lr": a.lr, "momentum": a.momentum,
           "torch_version": r["torch_version"], "seconds": round(r["seconds"], 4),
           "samples_per_s": round(sps, 1),
           "final_loss": round(r["final_loss"], 4)}
    print(json.dumps(out, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
