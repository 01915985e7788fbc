"""The PyTorch twin of cohort's GPT (cohort/nn/models/gpt.h), for the PyTorch peers in bench/
(torch_zero.py). A separate file beside bench/torch_models.py (which holds the MLP and CNN
twins); MODELS["gpt"] there can import it from here.

Same layout and init as cohort::nn::GPT: byte-level decoder-only transformer, pre-LN,

  x = drop(wte(idx) + wpe(0..T-1))
  per block: x = x + attn(ln1(x)); x = x + mlp(ln2(x))
             attn: qkv Linear C->3C, causal softmax attention over n_head heads, proj C->C, drop
             mlp:  fc C->4C, GELU (exact, erf), proj 4C->C, drop
  logits = lm_head(ln_f(x)), lm_head without bias and NOT tied to wte

LayerNorm eps 1e-5; Linear and Embedding weights N(0, 0.02), attn.proj and mlp.proj weights
N(0, 0.02 / sqrt(2 * n_layer)), biases 0. Parameter count with the defaults (vocab 256, 4 layers,
4 heads, 128 wide, context 128): 875,264, as `cohort train examples/kjv_gpt.toml` prints.
Attention is written out (masked softmax) by default: torch 1.13 has no
scaled_dot_product_attention. attention="sdpa" (bench/torch_gpu_gpt.py) uses
F.scaled_dot_product_attention(is_causal=True) where torch has it (2.0 on): the same function,
without the T x T score matrix the written-out path keeps for its backward (12 layers x 8
sequences x 12 heads x 1024^2 floats is 4.8 GB at GPT-2 small's shape), as cohort's fused
attention keeps none. Where torch lacks it, "sdpa" falls back to the written-out path.

Import it after the caller has set its thread environment: importing torch.nn loads torch.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout, attention="math"):
        super().__init__()
        assert n_embd % n_head == 0
        assert attention in ("math", "sdpa"), attention
        self.n_head = n_head
        self.sdpa = attention == "sdpa" and hasattr(F, "scaled_dot_product_attention")
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)
        # A plain attribute, not a buffer: DDP would broadcast a buffer before every forward
        # (and gloo cannot broadcast bool tensors); cohort's fused attention has no such state.
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.mask = mask.view(1, 1, block_size, block_size)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:  # no dropout on the attention weights, as below and in cohort
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = self.mask[:, :, :T, :T].to(x.device)  # a no-op on the CPU; a copy on a GPU
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.drop(self.proj(y))


class GptMlp(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x))))


class GptBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout, attention="math"):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout, attention)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = GptMlp(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """cohort::nn::GPT(GptOptions{vocab_size, n_layer, n_head, n_embd, block_size, dropout});
    attention: "math" (written out) or "sdpa" (see the module's docstring)."""

    def __init__(self, vocab_size=256, n_layer=4, n_head=4, n_embd=128, block_size=128,
                 dropout=0.0, attention="math"):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GptBlock(n_embd, n_head, block_size, dropout, attention)
                                    for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            elif name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        T = idx.size(1)
        assert T <= self.block_size
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))
