#!/usr/bin/python3
"""Weights from PyTorch into cohort: train the Fashion-MNIST CNN in PyTorch, evaluate it, and save
its state_dict as safetensors for `cohort train --set model.init_from=FILE` (docs/models.md,
"Pretrained weights"). cohort's CNN has the same layers and names (conv1, conv2, fc1, fc2), so
no renames are needed; a model with other names maps them with model.init_map.

    /usr/bin/python3 examples/python/torch_to_cohort.py --steps 300 --out /tmp/cnn.safetensors
    build/bin/cohort train examples/fashion_cnn.toml --set model.init_from=/tmp/cnn.safetensors \\
        --set train.eval_at_start=true --set train.max_steps=1

The first prints the test accuracy in PyTorch; cohort's "eval (test) after step 0" line then
gives the same figure for the same weights, before any training step.

safetensors (https://github.com/huggingface/safetensors) is 8 bytes of header length, a JSON
header naming each tensor's dtype, shape and byte range, then the raw little-endian bytes: short
enough to write here without the safetensors package (Debian has none).
"""
import argparse
import gzip
import json
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"
DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.float64: "F64", torch.int64: "I64"}


class CNN(nn.Module):
    """The layers of cohort's model.type = "cnn" (cohort/nn/models/cnn.h), with its names."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def save_safetensors(tensors, path):
    """Writes a dict of name -> tensor as a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(split):
    """Fashion-MNIST standardised as cohort does (data.mean 0.2860, data.std 0.3530)."""
    with gzip.open(f"{DATA}{split}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{DATA}{split}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="SGD steps of batch 64")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="the .safetensors file to write")
    p.add_argument("--layers", default="",
                   help="a cohort layer list (model.layers) to train instead of the CNN, built "
                        "by cohort.torch.sequential (load with model.type = \"sequential\")")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    (x, y), (tx, ty) = load("train"), load("t10k")
    if a.layers:
        from cohort.torch.sequential import build
        model = build(a.layers, (1, 28, 28), 10)
    else:
        model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    order = torch.randperm(len(y))
    for step in range(a.steps):
        b = order[(step * 64) % len(y):][:64]
        loss = F.cross_entropy(model(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()  # batch norm's running statistics, no dropout: as cohort evaluates
    with torch.no_grad():
        correct = sum(int((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum())
                      for i in range(0, len(ty), 1000))
    save_safetensors(model.state_dict(), a.out)
    print(f"torch: {a.steps} steps, test accuracy {100.0 * correct / len(ty):.2f}% "
          f"({correct} of {len(ty)}); weights in {a.out}")


if __name__ == "__main__":
    main()
