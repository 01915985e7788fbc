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


def load_images(a, split):
    """An image folder's split as cohort reads it: classes by sorted sub-folder name, files by
    name, pixels / 255 standardised with --mean and --std, [N, C, H, W]."""
    import numpy as np
    from PIL import Image
    root = os.path.join(a.images, split)
    xs, ys = [], []
    for label, cls in enumerate(sorted(os.listdir(root))):
        for f in sorted(os.listdir(os.path.join(root, cls))):
            img = np.asarray(Image.open(os.path.join(root, cls, f)).convert("RGB"), np.float32)
            xs.append(img.transpose(2, 0, 1))
            ys.append(label)
    x = (np.stack(xs) / 255.0 - a.mean) / a.std
    return torch.from_numpy(x.astype(np.float32)), torch.tensor(ys, dtype=torch.int64)


def sequential_model(a, x):
    from cohort.torch.sequential import build
    return build(a.layers, tuple(x.shape[1:]), 10)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="cohort")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="first N training samples (0: all)")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"],
                   help="cnn: bench/torch_fashion_accuracy.py's CNN, lr 0.02 (as cohort's)")
    p.add_argument("--layers", default="",
                   help="a cohort layer list (model.layers): that model, built by "
                        "cohort.torch.sequential, instead of --model")
    p.add_argument("--images", default="",
                   help="an image folder with train/ and test/ (data.dataset = image_folder) "
                        "instead of Fashion-MNIST's files; pixels / 255, then --mean, --std")
    p.add_argument("--mean", type=float, default=0.0)
    p.add_argument("--std", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=0.0, help="0: 0.05 for the MLP, else 0.02")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    x, y = load_images(a, "train") if a.images else load("train")
    if a.limit:
        x, y = x[:a.limit], y[:a.limit]
    train = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(train, world, rank, seed=a.seed)
    loader = torch.utils.data.DataLoader(train, batch_size=64, sampler=sampler)
    net = DDP(sequential_model(a, x) if a.layers else model(a.model))
    lr = a.lr or (0.05 if a.model == "mlp" and not a.layers else 0.02)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(net(xb), yb).backward()
            opt.step()
    tx, ty = load_images(a, "test") if a.images else load("t10k")
    if a.limit:
        tx, ty = tx[:a.limit], ty[:a.limit]
    net.module.eval()  # batch norm's running statistics, as cohort evaluates
    with torch.no_grad():  # each rank scores every test image: the same model everywhere
        correct = sum(int((net.module(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum())
                      for i in range(0, len(ty), 1000))
        accuracy = correct / len(ty)
    if rank == 0:
        print(json.dumps({"script": "ddp", "model": a.model, "backend": a.backend, "seed": a.seed,
                          "workers": world, "epochs": a.epochs, "accuracy": accuracy}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
