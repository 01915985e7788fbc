"""A torchrun DDP training script for the accuracy claim of issue 34: the same script on gloo
and on cohort's backend, only the backend's name different (--backend), must reach the same test
accuracy. bench/torch_fashion_accuracy.py's MLP and data (Fashion-MNIST, standardised), a
DistributedSampler, SGD(lr 0.05, momentum 0.9), batch 64 per rank, one thread per rank.
Rank 0 prints one JSON line {"backend", "seed", "accuracy", ...}. Under `cohort run -n 2` or
torchrun (bench/run_python_accuracy.sh runs it):

    cohort run -n 2 -- /usr/bin/python3 bench/torch_ddp_accuracy.py --backend cohort --seed 1
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_fashion_accuracy import load, model  # noqa: E402

import cohort.torch  # noqa: E402,F401  registers the "cohort" backend


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="cohort")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="first N training samples (0: all)")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"],
                   help="cnn: bench/torch_fashion_accuracy.py's CNN, lr 0.02 (as cohort's)")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    x, y = load("train")
    if a.limit:
        x, y = x[:a.limit], y[:a.limit]
    train = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(train, world, rank, seed=a.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=64, sampler=sampler)
    net = DDP(model(a.model))
    opt = torch.optim.SGD(net.parameters(), lr=0.05 if a.model == "mlp" else 0.02, momentum=0.9)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(net(xb), yb).backward()
            opt.step()
    tx, ty = load("t10k")
    with torch.no_grad():  # each rank scores every test image: the same model everywhere
        accuracy = (net.module(tx).argmax(1) == ty).float().mean().item()
    if rank == 0:
        print(json.dumps({"script": "ddp", "model": a.model, "backend": a.backend, "seed": a.seed,
                          "workers": world, "epochs": a.epochs, "accuracy": accuracy}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
