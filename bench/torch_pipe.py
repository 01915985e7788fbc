#!/usr/bin/python3
"""PyTorch GPipe over 2 processes (gloo send/recv), the peer of cohort's pipeline strategy on
the GPT of examples/kjv_gpt.toml.

torch.distributed.pipeline.sync.Pipe is not the peer: it is torchgpipe, one process driving
every stage (each stage's module on its own device, micro-batches handed between them), and it
needs the RPC framework initialised even so. On this CPU it runs (checked with torch 1.13:
rpc.init_rpc with world_size 1, Pipe(nn.Sequential(...), chunks=4), forward and backward), but
with every stage in the one process; it cannot put stages in separate processes, which is what
cohort's pipeline does (one stage per rank). So this peer writes the GPipe schedule by hand with
torch.distributed's point-to-point calls, as Megatron-LM and DeepSpeed do.

S processes (--stages, default 2; torch.multiprocessing spawn, gloo over 127.0.0.1 on a free
port), one thread each, hold consecutive slices of the GPT of bench/torch_gpt.py (cohort's GPT
twin): stage 0 the embeddings and the first blocks, the last stage the last blocks, ln_f and
lm_head; the blocks are split as evenly as possible, earlier stages taking the remainder. Every
stage builds the whole model with the same seed and keeps its slice, so the parameters are
those of the one-process model.

A step (GPipe, Huang et al. 2019): the batch of --batch rows ([data] batch_size of the config)
is cut into --micro-batches m equal micro-batches. Forward of all m, in order: a stage receives
its input activation from the previous stage (stage 0 embeds the bytes), runs its slice and
sends the output on with isend; the last stage computes cross entropy / m. Then backward of all
m in reverse order: the last stage backpropagates its loss, the others receive the gradient of
their output, and each sends the gradient of its input back. Gradients accumulate over the m
micro-batches; clip_grad_norm clips by the global norm over all stages (one allreduce of the
squared norms); then AdamW (lr, betas, eps, weight_decay of [optim]) and the cosine schedule
with warmup as bench/torch_zero.py. Every stage draws the same byte windows (one shared
seed): stage 0 needs the inputs, the last stage the targets.

Data: byte windows of block_size + 1 at random offsets of the training split of --data, else
cohort's KJV cache; where neither exists, uniformly random bytes (stderr says so).

Each stage runs --warmup untimed steps, meets the others at a barrier, then --steps timed
steps. samples/s counts samples through the pipeline: batch * steps / rank 0's wall time (the
stages work on the same samples; they are not replicas).

Prints one JSON line on stdout (from rank 0's results), a human line on stderr:

  /usr/bin/python3 bench/torch_pipe.py --steps 20 --micro-batches 4
  {"impl":"torch-gpipe","model":"gpt","stages":2,"micro_batches":4,...,"samples_per_s":...}
"""
import argparse
import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_zero  # noqa: E402  (its config reading, lr schedule and free_port; no torch import)

ROOT = os.path.dirname(HERE)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, help="rows per step (default: [data] batch_size)")
    p.add_argument("--config", default=os.path.join(ROOT, "examples", "kjv_gpt.toml"))
    p.add_argument("--data", help="text file (default: cohort's KJV cache, %s)"
                   % torch_zero.default_corpus())
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    import tomllib
    with open(a.config, "rb") as f:
        cfg = tomllib.load(f)
    model, data, optim = cfg.get("model", {}), cfg.get("data", {}), cfg.get("optim", {})
    if model.get("type") != "gpt":
        p.error(f"{a.config}: [model] type is {model.get('type')!r}; this peer trains the gpt")
    a.gpt = dict(vocab_size=256, n_layer=int(model.get("n_layer", 4)),
                 n_head=int(model.get("n_head", 4)), n_embd=int(model.get("n_embd", 128)),
                 block_size=int(model.get("block_size", 128)),
                 dropout=float(model.get("dropout", 0.0)))
    a.batch = a.batch or int(data.get("batch_size", 32))
    a.val_fraction = float(data.get("val_fraction", 0.1))
    a.lr = float(optim.get("lr", 0.01))
    a.betas = (float(optim.get("beta1", 0.9)), float(optim.get("beta2", 0.999)))
    a.eps = float(optim.get("eps", 1e-8))
    a.weight_decay = float(optim.get("weight_decay", 0.0))
    a.clip = float(optim.get("clip_grad_norm", 0.0))
    a.schedule = optim.get("schedule", "constant")
    a.min_lr = float(optim.get("min_lr", 0.0))
    a.total_steps = a.warmup + a.steps
    a.warmup_steps = min(int(optim.get("warmup_steps", 0)), a.total_steps)
    for name in ("stages", "steps", "batch", "micro_batches"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.stages < 2:
        p.error("--stages must be >= 2 (a pipeline)")
    if a.stages > a.gpt["n_layer"]:
        p.error(f"--stages {a.stages} > n_layer {a.gpt['n_layer']}: a stage needs a block")
    if a.batch % a.micro_batches:
        p.error(f"--micro-batches {a.micro_batches} does not divide the batch {a.batch}")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    a.data = a.data or torch_zero.default_corpus()
    return a


def stage_blocks(n_layer, stages, s):
    """[lo, hi) of the blocks stage s holds: even split, earlier stages take the remainder."""
    base, extra = divmod(n_layer, stages)
    lo = s * base + min(s, extra)
    return lo, lo + base + (1 if s < extra else 0)


def make_stage(a, s):
    """This stage's slice of the one-process GPT (same seed: the same parameters)."""
    import torch
    import torch.nn as nn
    from torch_gpt import GPT

    torch.manual_seed(a.seed)
    full = GPT(**a.gpt)
    lo, hi = stage_blocks(a.gpt["n_layer"], a.stages, s)
    first, last = s == 0, s == a.stages - 1

    class Stage(nn.Module):
        def __init__(self):
            super().__init__()
            if first:
                self.wte, self.wpe, self.drop = full.wte, full.wpe, full.drop
            self.blocks = nn.ModuleList(full.blocks[lo:hi])
            if last:
                self.ln_f, self.lm_head = full.ln_f, full.lm_head

        def forward(self, x):
            if first:
                pos = torch.arange(x.size(1), dtype=torch.long)
                x = self.drop(self.wte(x) + self.wpe(pos))
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x)) if last else x

    return Stage()


def load_text(a):
    import numpy as np
    import torch
    if os.path.exists(a.data):
        with open(a.data, "rb") as f:
            text = np.frombuffer(f.read(), dtype=np.uint8)
        return torch.from_numpy(text[:int(len(text) * (1.0 - a.val_fraction))].astype(np.int64))
    print(f"torch_pipe: {a.data} not found; training on random bytes", file=sys.stderr)
    return torch.randint(0, 256, (1 << 20,), generator=torch.Generator().manual_seed(a.seed))


def worker(rank, world, port, a, queue):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    stage = make_stage(a, rank)
    stage.train()
    params = list(stage.parameters())
    opt = torch.optim.AdamW(params, lr=a.lr, betas=a.betas, eps=a.eps,
                            weight_decay=a.weight_decay)
    first, last = rank == 0, rank == world - 1
    train = load_text(a)
    T, B, m = a.gpt["block_size"], a.batch, a.micro_batches
    mb, C, V = B // m, a.gpt["n_embd"], a.gpt["vocab_size"]
    window = torch.arange(T + 1)
    gen = torch.Generator().manual_seed(a.seed * 1000003)  # the same on every stage

    def forward_all(x, y):
        """GPipe's forward phase: m micro-batches in order; returns what backward needs."""
        saved, sends = [], []
        for k in range(m):
            if first:
                inp = x[k * mb:(k + 1) * mb]
            else:
                inp = torch.empty(mb, T, C)
                dist.recv(inp, src=rank - 1)
                inp.requires_grad_()
            out = stage(inp)
            if last:
                logits = out.reshape(-1, V)
                out = F.cross_entropy(logits, y[k * mb:(k + 1) * mb].reshape(-1)) / m
            else:
                sends.append(dist.isend(out.detach(), dst=rank + 1))
            saved.append((inp, out))
        for w in sends:
            w.wait()
        return saved

    def backward_all(saved):
        """GPipe's backward phase: m micro-batches in reverse; returns the summed loss."""
        sends, loss = [], 0.0
        for inp, out in reversed(saved):
            if last:
                out.backward()
                loss += out.item()
            else:
                grad = torch.empty_like(out)
                dist.recv(grad, src=rank + 1)
                out.backward(grad)
            if not first:
                sends.append(dist.isend(inp.grad, dst=rank - 1))
        for w in sends:
            w.wait()
        return loss

    def clip_global(max_norm):
        """clip_grad_norm_ over every stage's parameters: the squared norms summed first."""
        sq = torch.zeros(1)
        for p in params:
            if p.grad is not None:
                sq += p.grad.pow(2).sum()
        dist.all_reduce(sq)
        scale = max_norm / (sq.sqrt().item() + 1e-6)
        if scale < 1.0:
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale)

    def step(i):
        off = torch.randint(0, len(train) - T - 1, (B, 1), generator=gen)
        xy = train[off + window]
        opt.zero_grad(set_to_none=True)
        loss = backward_all(forward_all(xy[:, :-1], xy[:, 1:]))
        if a.clip > 0:
            clip_global(a.clip)
        for g in opt.param_groups:
            g["lr"] = torch_zero.lr_at(a, i)
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    dist.barrier()
    w0 = time.perf_counter()
    loss = 0.0
    for i in range(a.warmup, a.warmup + a.steps):
        loss = step(i)
    seconds = time.perf_counter() - w0
    dist.barrier()
    n_params = sum(p.numel() for p in params)
    dist.destroy_process_group()
    queue.put({"rank": rank, "seconds": seconds, "final_loss": loss, "parameters": n_params,
               "blocks": list(stage_blocks(a.gpt["n_layer"], world, rank)),
               "torch_version": torch.__version__})


def main():
    a = parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(worker, args=(a.stages, torch_zero.free_port(), a, queue), nprocs=a.stages,
             join=True)
    results = sorted((queue.get() for _ in range(a.stages)), key=lambda r: r["rank"])
    r = results[0]
    sps = a.batch * a.steps / r["seconds"]
    final_loss = results[-1]["final_loss"]  # the last stage computes the loss
    print(f"torch-gpipe gpt {a.stages} stages x {a.micro_batches} micro-batches gloo: "
          f"{sps:.1f} samples/s ({r['seconds'] * 1e3 / a.steps:.1f} ms/step), "
          f"loss {final_loss:.4f}", file=sys.stderr)
    out = {"impl": "torch-gpipe", "model": "gpt", "stages": a.stages,
           "micro_batches": a.micro_batches, "backend": "gloo", "batch": a.batch, "threads": 1,
           "steps": a.steps, "warmup": a.warmup,
           "parameters": sum(x["parameters"] for x in results),
           "stage_blocks": [x["blocks"] for x in results], "gpt": a.gpt, "lr": a.lr,
           "clip_grad_norm": a.clip, "torch_version": r["torch_version"],
           "seconds": round(r["seconds"], 4), "samples_per_s": round(sps, 1),
           "final_loss": round(final_loss, 4)}
    print(json.dumps(out, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
