#!/usr/bin/python3
"""PyTorch peer for the accuracy claim: MLP 784-512-256-10 on Fashion-MNIST, 1 epoch, batch 64,
SGD(lr 0.05, momentum 0.9), inputs standardised with mean 0.2860 / std 0.3530, for several seeds.
Prints one test accuracy per seed and the median, to compare with cohort's seed spread:

  /usr/bin/python3 bench/torch_fashion_accuracy.py --seeds 5 [--model mlp|cnn]
"""
import argparse, gzip, statistics
import numpy as np
import torch
import torch.nn as nn

D = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    with gzip.open(D + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load(split):
    x = idx(f"{split}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32)
    y = idx(f"{split}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy((x / 255.0 - 0.2860) / 0.3530), torch.from_numpy(y)


def model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def run(kind, seed, train, test):
    torch.manual_seed(seed)
    m = model(kind)
    lr = 0.05 if kind == "mlp" else 0.02
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    x, y = train
    perm = torch.randperm(len(y))
    for i in range(0, len(y), 64):
        b = perm[i:i + 64]
        loss = nn.functional.cross_entropy(m(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (m(test[0]).argmax(1) == test[1]).float().mean().item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    a = p.parse_args()
    torch.set_num_threads(2)
    train, test = load("train"), load("t10k")
    accs = []
    for s in range(a.seeds):
        accs.append(run(a.model, s, train, test))
        print(f"torch {a.model} seed {s}: {100 * accs[-1]:.2f}%", flush=True)
    print(f"torch {a.model} median over {a.seeds} seeds: {100 * statistics.median(accs):.2f}%")


if __name__ == "__main__":
    main()
