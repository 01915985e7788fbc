#!/usr/bin/python3
"""PyTorch ZeRO stage 1 (ZeroRedundancyOptimizer around DDP, gloo), the peer of
`cohort train examples/kjv_gpt.toml --workers N --set parallel.strategy=zero --set zero.stage=1`.

W processes on one host (torch.multiprocessing spawn, gloo over loopback TCP on a free port),
one thread each, train the GPT of bench/torch_gpt.py (cohort's GPT twin) with the [model],
[data] and [optim] of examples/kjv_gpt.toml (or --config): layers, heads, width, context,
dropout, batch_size per rank; AdamW with lr, beta1/beta2, eps and weight_decay on every
parameter (as cohort), the cosine schedule with linear warmup (warmup capped at the run's
steps, as bench/run_zero_bench.sh sets for cohort), and clip_grad_norm on the averaged
gradient. The model is wrapped in DistributedDataParallel; the optimizer is
torch.distributed.optim.ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW,
...): each rank keeps AdamW state for its share of the parameters and broadcasts the updated
parameters after its step. --plain-ddp uses a plain torch.optim.AdamW on every rank instead
(DDP only: every rank holds the whole optimizer state), for reference.

Data: byte windows of block_size + 1 at uniformly random offsets of the training split (the
first 1 - val_fraction of the text) of the same corpus cohort reads: --data, else cohort's
cache of Debian's bible-kjv-text ($XDG_CACHE_HOME/cohort/kjv.txt or ~/.cache/cohort/kjv.txt,
written by any `cohort train examples/kjv_gpt.toml` run). Each rank draws its own offsets.

A step is: draw the batch, forward, cross entropy over all B*T positions, zero_grad(set_to_none=
True), backward (DDP allreduces the buckets during it), clip_grad_norm_, set the lr, optimizer
step, loss.item(). Each rank runs --warmup untimed steps, meets the others at a barrier, then
runs --steps timed steps. samples/s counts all ranks together: workers * batch * steps / rank
0's wall time.

Memory, per rank, after the timed steps: parameters, gradients and optimizer state (sum of the
nbytes of the tensors each holds: for ZeRO the local AdamW's state, this rank's shard) and the
peak resident set (ru_maxrss; torch's CPU allocator has no peak counter; this covers the whole
process, the Python interpreter and torch's libraries included). DDP's own bucket buffers
(about one more copy of the gradients) are not counted in "gradients".

Prints one JSON line on stdout, a human line on stderr:

  /usr/bin/python3 bench/torch_zero.py --workers 2 --steps 30
  {"impl":"torch-zero1","model":"gpt","workers":2,...,"samples_per_s":...,"memory_ranks":[...]}
"""
import argparse
import gc
import json
import math
import os
import resource
import socket
import sys
import time
import tomllib

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_corpus():
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = os.path.join(xdg, "cohort") if xdg else os.path.expanduser("~/.cache/cohort")
    return os.path.join(base, "kjv.txt")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, help="per rank (default: [data] batch_size of the config)")
    p.add_argument("--config", default=os.path.join(ROOT, "examples", "kjv_gpt.toml"))
    p.add_argument("--data", help="text file (default: cohort's KJV cache, %s)" % default_corpus())
    p.add_argument("--plain-ddp", action="store_true",
                   help="plain AdamW on every rank (DDP without ZeRO), for reference")
    p.add_argument("--bucket-view", action="store_true",
                   help="ZeroRedundancyOptimizer(parameters_as_bucket_view=True)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    with open(a.config, "rb") as f:
        cfg = tomllib.load(f)
    model, data, optim = cfg.get("model", {}), cfg.get("data", {}), cfg.get("optim", {})
    if model.get("type") != "gpt":
        p.error(f"{a.config}: [model] type is {model.get('type')!r}; this peer trains the gpt")
    if optim.get("name", "sgd") != "adamw":
        p.error(f"{a.config}: [optim] name is {optim.get('name')!r}; this peer implements adamw")
    # Defaults are cohort's registry defaults (cohort/train/config/registry.cc).
    a.gpt = dict(vocab_size=256, n_layer=int(model.get("n_layer", 4)),
                 n_head=int(model.get("n_head", 4)), n_embd=int(model.get("n_embd", 128)),
                 block_size=int(model.get("block_size", 128)),
                 dropout=float(model.get("dropout", 0.0)))
    a.batch = a.batch or int(data.get("batch_size", 64))
    a.val_fraction = float(data.get("val_fraction", 0.1))
    a.lr = float(optim.get("lr", 0.01))
    a.betas = (float(optim.get("beta1", 0.9)), float(optim.get("beta2", 0.999)))
    a.eps = float(optim.get("eps", 1e-8))
    a.weight_decay = float(optim.get("weight_decay", 0.0))
    a.clip = float(optim.get("clip_grad_norm", 0.0))
    a.schedule = optim.get("schedule", "constant")
    if a.schedule not in ("constant", "cosine"):
        p.error(f"{a.config}: [optim] schedule {a.schedule!r}: this peer has constant and cosine")
    a.min_lr = float(optim.get("min_lr", 0.0))
    a.total_steps = a.warmup + a.steps
    a.warmup_steps = min(int(optim.get("warmup_steps", 0)), a.total_steps)
    for name in ("workers", "steps", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    if a.workers < 2 and not a.plain_ddp:
        p.error("ZeRO needs --workers >= 2 (or --plain-ddp)")
    a.data = a.data or default_corpus()
    if not os.path.exists(a.data):
        sys.exit(f"torch_zero: {a.data} not found: run `cohort train examples/kjv_gpt.toml` once "
                 "(it extracts Debian's bible-kjv-text there) or pass --data")
    return a


def lr_at(a, step):
    """cohort's WarmupCosineLr (cohort/optim/schedule.cc) or a constant."""
    if a.schedule != "cosine":
        return a.lr
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    r = (step - a.warmup_steps) / max(1, a.total_steps - a.warmup_steps)
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * min(r, 1.0)))


def tensor_bytes(obj):
    """Sum of nbytes of every tensor inside obj (dicts, lists, tuples)."""
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def worker(rank, world, port, a, queue):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt import GPT

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(a.seed)  # DDP broadcasts rank 0's parameters anyway
    model = GPT(**a.gpt)
    model.train()
    net = DDP(model)
    hyper = dict(lr=a.lr, betas=a.betas, eps=a.eps, weight_decay=a.weight_decay)
    if a.plain_ddp:
        opt = torch.optim.AdamW(net.parameters(), **hyper)
    else:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW,
                                      parameters_as_bucket_view=a.bucket_view, **hyper)

    with open(a.data, "rb") as f:
        text = np.frombuffer(f.read(), dtype=np.uint8)
    train = torch.from_numpy(text[:int(len(text) * (1.0 - a.val_fraction))].astype(np.int64))
    T, B = a.gpt["block_size"], a.batch
    window = torch.arange(T + 1)
    gen = torch.Generator().manual_seed(a.seed * 1000003 + rank)
    V = a.gpt["vocab_size"]

    def step(i):
        off = torch.randint(0, len(train) - T - 1, (B, 1), generator=gen)
        xy = train[off + window]
        x, y = xy[:, :-1], xy[:, 1:]
        loss = F.cross_entropy(net(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(a, i)
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    dist.barrier()
    w0 = time.perf_counter()
    loss = 0.0
    for i in range(a.warmup, a.warmup + a.steps):
        loss = step(i)
    seconds = time.perf_counter() - w0
    dist.barrier()

    local = opt if a.plain_ddp else opt.optim  # ZeRO: the local AdamW over this rank's shard
    mem = {"rank": rank,
           "parameters": sum(tensor_bytes(p) for p in model.parameters()),
           "gradients": sum(tensor_bytes(p.grad) for p in model.parameters()
                            if p.grad is not None),
           "optimizer": tensor_bytes(list(local.state.values())),
           "optimizer_params": sum(p.numel() for g in local.param_groups for p in g["params"]),
           "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    result = {"rank": rank, "seconds": seconds, "final_loss": loss, "memory": mem,
              "torch_version": torch.__version__}
    # Teardown while the interpreter is fully alive. destroy_process_group() alone does not end
    # the gloo process group: DDP's reducer and ZeroRedundancyOptimizer hold it, so it used to
    # die with them later, and a C++ thread (gloo's workers, torch's thread pools) that takes
    # the GIL once Python is finalizing is ended by pthread_exit from inside a noexcept frame:
    # std::terminate, "terminate called without an active exception", SIGABRT. So: drop every
    # holder, meet at a barrier (no rank closes the store while another still uses it), destroy
    # the group, then leave without finalizing (SimpleQueue.put has written the result to the
    # pipe before it returns).
    del step, local, opt, net, model
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    gc.collect()
    queue.put(result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    try:
        mp.spawn(worker, args=(a.workers, free_port(), a, queue), nprocs=a.workers, join=True)
    except mp.ProcessExitedException as e:  # names the rank and the signal or exit code
        sys.exit(f"torch_zero: {e}")
    results = sorted((queue.get() for _ in range(a.workers)), key=lambda r: r["rank"])
    r = results[0]
    sps = a.workers * a.batch * a.steps / r["seconds"]
    impl = "torch-ddp" if a.plain_ddp else "torch-zero1"
    mems = [x["memory"] for x in results]
    print(f"{impl} gpt {a.workers} workers gloo: {sps:.1f} samples/s "
          f"({r['seconds'] * 1e3 / a.steps:.1f} ms/step), loss {r['final_loss']:.4f}; "
          "optimizer state per rank " +
          ", ".join(f"{m['optimizer'] / 2**20:.2f} MiB" for m in mems) +
          "; peak RSS per rank " + ", ".join(f"{m['max_rss'] / 2**20:.0f} MiB" for m in mems),
          file=sys.stderr)
    n_params = mems[0]["parameters"] // 4
    out = {"impl": impl, "model": "gpt", "workers": a.workers, "zero": not a.plain_ddp,
           "backend": "gloo", "batch": a.batch, "threads": 1, "steps": a.steps,
           "warmup": a.warmup, "parameters": n_params, "gpt": a.gpt, "lr": a.lr,
           "betas": list(a.betas), "eps": a.eps, "weight_decay": a.weight_decay,
           "clip_grad_norm": a.clip, "bucket_view": a.bucket_view,
           "torch_version": r["torch_version"], "seconds": round(r["seconds"], 4),
           "samples_per_s": round(sps, 1), "final_loss": round(r["final_loss"], 4),
           "memory_ranks": mems}
    print(json.dumps(out, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
