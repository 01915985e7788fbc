#!/usr/bin/python3
"""torchrun's peer for the recovery benchmark (bench/run_elastic_recovery.sh, docs/elastic.md
"Recovery time, beside torchrun"): what a PyTorch job does about a lost worker with torch's
elastic agent, `torchrun --max_restarts 1`: every worker is stopped and restarted, and the job
goes on from its last checkpoint.

The model and training are those of cohort's side of the benchmark: the MLP 784-128-10
(cohort's model.hidden = [128]) on Fashion-MNIST standardised as bench/torch_fashion_accuracy.py
does, a DistributedSampler, batch 64 per rank, SGD(lr 0.05, momentum 0.9), DDP on gloo, one
thread per process. Rank 0 writes a checkpoint (model, optimizer, step) every --ckpt-every steps
with torch.save and an atomic rename; every rank resumes from it when it is there.

On the first attempt only (TORCHELASTIC_RESTART_COUNT == "0"), rank --kill-rank kills itself
with SIGKILL right after completing step --kill-at-step. Rank 0 appends one JSON line per
completed step to --log: {"attempt", "step", "wall": time.time()}.

  python3 tests/docs/torchrun_compat.py --nproc_per_node 4 --max_restarts 1 \\
      --monitor_interval 0.1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29400 \\
      bench/torch_elastic_peer.py --steps 80 --kill-rank 2 --kill-at-step 60 \\
      --ckpt /tmp/peer/ckpt.pt --log /tmp/peer/steps.jsonl
"""
import argparse
import gzip
import json
import os
import signal
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

D = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    with gzip.open(D + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(split):  # as bench/torch_fashion_accuracy.py
    x = idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
    y = idx(f"{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy((x / 255.0 - 0.2860) / 0.3530), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True, help="steps of the whole run")
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--ckpt-every", type=int, default=50)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--ckpt", required=True, help="checkpoint file")
    p.add_argument("--log", required=True, help="rank 0's step log (JSON lines)")
    a = p.parse_args()

    torch.set_num_threads(1)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load("train")

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    if os.path.exists(a.ckpt):
        state = torch.load(a.ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    ddp = DDP(model)

    # One epoch's share of this rank, in the sampler's order; a resumed run skips the batches
    # done before the checkpoint (steps_per_epoch is far more than the benchmark's steps).
    sampler = DistributedSampler(range(len(y)), num_replicas=world, rank=rank, shuffle=True,
                                 seed=0)
    steps_per_epoch = len(sampler) // a.batch
    order = {}
    log = open(a.log, "a") if rank == 0 else None
    while step < a.steps:
        epoch, i = divmod(step, steps_per_epoch)
        if epoch not in order:
            sampler.set_epoch(epoch)
            order = {epoch: torch.tensor(list(sampler))}
        b = order[epoch][i * a.batch:(i + 1) * a.batch]
        loss = nn.functional.cross_entropy(ddp(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            if step % a.ckpt_every == 0:
                tmp = a.ckpt + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "step": step}, tmp)
                os.replace(tmp, a.ckpt)
            log.write(json.dumps({"attempt": attempt, "step": step, "wall": time.time()}) + "\n")
            log.flush()
        if attempt == 0 and rank == a.kill_rank and step == a.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
