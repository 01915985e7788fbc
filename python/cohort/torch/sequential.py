"""The torch.nn.Sequential of a cohort layer list (`model.layers`, docs/models.md).

    from cohort.torch.sequential import build
    net = build("conv2d 32 kernel=3; relu; maxpool 2; flatten; linear", (1, 28, 28), 10)

Each layer is its torch.nn namesake, sized from the shape before it as cohort sizes it, so the
model's state_dict() has the names and shapes of cohort's model of the same list: weights
trained here and saved with safetensors load with `model.init_from`, and the benches train the
same model on both sides (bench/torch_sequential_accuracy.py). Only what PyTorch has no module
for is defined here: a residual block, learned positions and causal self-attention, written the
way cohort computes them. Shape and syntax mistakes are cohort's job: build() assumes a list that
`cohort train` accepts.
"""
import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


class Residual(nn.Sequential):
    """x + its children applied in order (named "0", "1", ... as cohort's)."""

    def forward(self, x):
        return x + super().forward(x)


class Positions(nn.Module):
    """x [B, T, D] + weight[:T]: a learned position embedding, N(0, 0.02) as GPT-2's wpe."""

    def __init__(self, max_len, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, dim) * 0.02)

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class CausalSelfAttention(nn.Module):
    """cohort's attention layer: a fused qkv Linear, causal softmax attention per head, proj."""

    def __init__(self, dim, heads, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        for lin in (self.qkv, self.proj):  # GPT-2's N(0, 0.02), biases 0
            nn.init.normal_(lin.weight, 0.0, 0.02)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.drop(self.proj(y))


def _specs(text):
    """[(type, positional values, {key: value}, body)] with residual ... end nested."""
    items = [p.strip() for line in text.splitlines() for p in line.split("#")[0].split(";")]
    top, stack = [], []
    current = top
    for item in filter(None, items):
        words = item.split()
        kind = words[0].lower()
        pos = [w for w in words[1:] if "=" not in w]
        opts = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if kind == "end":
            current = stack.pop()
            continue
        spec = (kind, pos, opts, [])
        current.append(spec)
        if kind == "residual":
            stack.append(current)
            current = spec[3]
    return top


def _value(names, pos, opts, name, default=None, cast=int):
    if name in opts:
        return cast(opts[name])
    i = names.index(name) if name in names else len(pos)
    return cast(pos[i]) if i < len(pos) else default


def _flag(opts, name):
    return opts.get(name, "true") == "true"


def _layer(kind, pos, opts, shape, classes, vocab):
    """(module, shape after it) for one layer; shape is one sample's, without the batch."""
    v = lambda names, name, default=None, cast=int: _value(names, pos, opts, name, default, cast)
    if kind == "linear":
        out = v(["out"], "out", classes)
        return nn.Linear(shape[-1], out, bias=_flag(opts, "bias")), shape[:-1] + (out,)
    if kind == "conv2d":
        names = ["out", "kernel", "stride", "padding"]
        out, k = v(names, "out"), v(names, "kernel")
        s, p = v(names, "stride", 1), v(names, "padding", 0)
        size = lambda n: (n + 2 * p - k) // s + 1
        conv = nn.Conv2d(shape[0], out, k, stride=s, padding=p, bias=_flag(opts, "bias"))
        return conv, (out, size(shape[1]), size(shape[2]))
    if kind in ("maxpool", "avgpool"):
        k = v(["kernel", "stride"], "kernel")
        s = v(["kernel", "stride"], "stride", k) if kind == "maxpool" else k
        size = lambda n: (n - k) // s + 1
        layer = nn.MaxPool2d(k, s) if kind == "maxpool" else nn.AvgPool2d(k)
        return layer, (shape[0], size(shape[1]), size(shape[2]))
    if kind == "globalavgpool":
        return nn.AdaptiveAvgPool2d(1), (shape[0], 1, 1)
    if kind == "batchnorm":
        cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
        eps, m = v([], "eps", 1e-5, float), v([], "momentum", 0.1, float)
        return cls(shape[0], eps=eps, momentum=m), shape
    if kind == "layernorm":
        return nn.LayerNorm(shape[-1], eps=v([], "eps", 1e-5, float)), shape
    if kind == "dropout":
        return nn.Dropout(v(["p"], "p", 0.5, float)), shape
    simple = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    if kind in simple:
        return simple[kind](), shape
    if kind == "flatten":
        return nn.Flatten(), (math.prod(shape),)
    if kind == "embedding":
        dim = v(["dim"], "dim")
        return nn.Embedding(vocab, dim), (shape[0], dim)
    if kind == "positions":
        return Positions(shape[0], shape[1]), shape
    if kind == "attention":
        names = ["heads", "dropout"]
        return CausalSelfAttention(shape[1], v(names, "heads"), v(names, "dropout", 0.0, float)), shape
    raise ValueError(f"unknown layer type {kind!r}")


def _build_into(seq, specs, shape, classes, vocab):
    for kind, pos, opts, body in specs:
        if kind == "residual":
            block = Residual()
            _build_into(block, body, shape, classes, vocab)
            seq.append(block)
            continue
        module, shape = _layer(kind, pos, opts, shape, classes, vocab)
        seq.append(module)
    return shape


def build(layers, sample_shape, classes, vocab=None):
    """torch.nn.Sequential of the list `layers` for samples of `sample_shape` (e.g. (1, 28, 28),
    (784,), or (T,) token ids with vocab set) and `classes` outputs."""
    seq = nn.Sequential()
    _build_into(seq, _specs(layers), tuple(sample_shape), classes, vocab or classes)
    return seq


def layers_of_config(path):
    """model.layers of a cohort TOML config written as one string (the benches' configs)."""
    text = open(path).read()
    m = re.search(r'^layers\s*=\s*"""(.*?)"""', text, re.S | re.M)
    if m is None:
        m = re.search(r'^layers\s*=\s*"(.*?)"', text, re.M)
    if m is None:
        raise ValueError(f"{path}: no model.layers string")
    return m.group(1)
