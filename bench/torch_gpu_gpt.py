"""The PyTorch peer of bench/run_gpu_gpt.sh (issue 33): trains the GPT of bench/torch_gpt.py
(cohort's GPT twin: same layers, init, byte vocabulary of 256, exact-erf GELU, untied lm_head)
on one GPU, eager or under torch.compile, in f32 or bf16 autocast, and prints one JSON line:

  {"mode", "precision", "device", "ms_per_step_median", "tokens_per_s", "params", ...}

The optimizer is cohort's examples/gpt2_small.toml: AdamW lr 6e-4, weight decay 0.1 on every
parameter (as cohort's optim::AdamW), betas (0.9, 0.95), eps 1e-8, gradient norm clipped to 1.0;
the learning rate stays constant (a schedule does not change a step's cost). Batches are random
bytes made on the device before timing: what is measured is the step (forward, loss, backward,
clip, AdamW), not a data loader.

  --precision f32   plain f32, TF32 off (torch's default; --tf32 turns it on): cohort's f32
                    matmuls are true f32, MatmulOptions::allow_tf32 = false in
                    cohort/kernels/cuda/matmul.h, and device/cuda_kernels.cc makes its handles
                    with the default options
  --precision bf16  torch.autocast(device_type, dtype=torch.bfloat16) around forward and loss,
                    f32 master weights and optimizer state: torch's usual mixed precision

Attention is F.scaled_dot_product_attention(is_causal=True) where torch has it (cohort's is
fused, without a T x T matrix too). AdamW is fused=True where torch offers it on the device
(cohort's AdamW is one fused multi-tensor launch); "optimizer" in the JSON says which.

Timing: --warmup steps first (the first one compiles under --mode compile; its seconds are
"first_step_s"), then --steps steps, each ended by torch.cuda.synchronize(): the median of
those is ms_per_step_median. cohort reads the loss on the host every step, so its steps end
synchronised too.

Without CUDA it runs on the CPU, with a tiny shape unless the shape is given (a GPT-2 small step
takes minutes there): the smoke run of bench/run_gpu_gpt.sh --smoke. A torch without
torch.compile (Debian's 1.13) answers --mode compile with {"skipped": reason} and exit 0; a
failure prints {"error": ...} and exits 1.
"""
import argparse
import inspect
import json
import math
import os
import statistics
import sys
import time

# GPT-2 small (examples/gpt2_small.toml) and the CPU smoke shape: layers, heads, width, context,
# batch.
FULL = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, batch=8)
SMOKE = dict(n_layer=2, n_head=2, n_embd=64, block_size=64, batch=4)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("eager", "compile"), default="eager")
    p.add_argument("--precision", choices=("f32", "bf16"), default="f32")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: cuda where torch sees a GPU, else cpu")
    p.add_argument("--smoke", action="store_true",
                   help="the tiny CPU shape (the default without CUDA)")
    for key in ("n_layer", "n_head", "n_embd", "block_size", "batch"):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None,
                       help=f"default {FULL[key]} on a GPU, {SMOKE[key]} with --smoke or on a CPU")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--tf32", action="store_true", help="f32 matmuls on TF32 tensor cores")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.warmup < 1 or a.steps < 1:
        p.error("--warmup and --steps must be >= 1 (the first step allocates, or compiles)")
    return a


def emit(record, code=0):
    print(json.dumps(record), flush=True)
    sys.exit(code)


def set_tf32(torch, on):
    """TF32 for f32 matmuls only with --tf32, through set_float32_matmul_precision, the one API
    that torch 1.12 to 2.11 and inductor all read: torch 2.9 on has a second one
    (fp32_precision), and code that sets one and reads the other fails with "mix of the legacy
    and new APIs". Off, nothing is set: TF32 matmuls are off by default since torch 1.12.
    Returns the setting: "highest" is true f32."""
    if on:
        torch.set_float32_matmul_precision("high")
    return torch.get_float32_matmul_precision()


def make_optimizer(torch, params, device):
    """cohort's AdamW hyper-parameters; fused where this torch offers it on the device."""
    hyper = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if device == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        try:
            return torch.optim.AdamW(params, fused=True, **hyper), "AdamW(fused)"
        except (RuntimeError, TypeError, ValueError):
            pass
    if "foreach" in inspect.signature(torch.optim.AdamW).parameters:
        return torch.optim.AdamW(params, foreach=True, **hyper), "AdamW(foreach)"
    return torch.optim.AdamW(params, **hyper), "AdamW"


def main():
    a = parse_args()
    base = {"mode": a.mode, "precision": a.precision}
    import torch  # after argparse: --help needs no torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt import GPT

    device = a.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        emit({**base, "error": "--device cuda, but torch sees no GPU"}, 1)
    shape = SMOKE if (a.smoke or device == "cpu") else FULL
    shape = {k: getattr(a, k) if getattr(a, k) is not None else v for k, v in shape.items()}
    base.update(device=device, torch=torch.__version__, **shape)
    if a.mode == "compile" and not hasattr(torch, "compile"):
        emit({**base, "skipped": f"torch {torch.__version__} has no torch.compile (2.0 on)"})

    fp32_matmul = set_tf32(torch, a.tf32) if device == "cuda" else "n/a"
    # NVIDIA's containers set this to force TF32 into every f32 cuBLAS call, whatever the above.
    override = os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "0") not in ("", "0")
    tf32 = device == "cuda" and (fp32_matmul != "highest" or override)
    torch.manual_seed(a.seed)
    B, T = shape["batch"], shape["block_size"]
    model = GPT(vocab_size=256, n_layer=shape["n_layer"], n_head=shape["n_head"],
                n_embd=shape["n_embd"], block_size=T, dropout=0.0, attention="sdpa").to(device)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    # The embedding tables are lookups, not matmuls: the MFU formula leaves them out.
    embedding = model.wte.weight.numel() + model.wpe.weight.numel()
    opt, opt_name = make_optimizer(torch, model.parameters(), device)
    step_model = torch.compile(model) if a.mode == "compile" else model
    autocast = (torch.autocast(device_type=device, dtype=torch.bfloat16)
                if a.precision == "bf16" else None)

    # A few batches of random bytes on the device, cycled: no host-to-device copy in the step.
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    rows = [torch.randint(0, 256, (B, T + 1), generator=g) for _ in range(4)]
    data = [(r[:, :-1].contiguous().to(device), r[:, 1:].contiguous().to(device)) for r in rows]

    def step(i):
        x, y = data[i % len(data)]
        if autocast is not None:
            with autocast:
                loss = F.cross_entropy(step_model(x).view(-1, 256), y.reshape(-1))
        else:
            loss = F.cross_entropy(step_model(x).view(-1, 256), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    first_step_s = None
    loss = None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step(i)
        sync()
        dt = time.perf_counter() - t0
        if i == 0:
            first_step_s = dt
        if i >= a.warmup:
            times.append(dt)
    last_loss = float(loss.item())
    if not math.isfinite(last_loss):
        emit({**base, "error": f"the loss is {last_loss} after {a.warmup + a.steps} steps"}, 1)
    median = statistics.median(times)
    record = {**base,
              "ms_per_step_median": round(median * 1e3, 3),
              "ms_per_step_mean": round(statistics.fmean(times) * 1e3, 3),
              "tokens_per_s": round(B * T / median, 1),
              "steps_timed": len(times), "warmup": a.warmup,
              "first_step_s": round(first_step_s, 2),
              "params": params, "params_nonembedding": params - embedding,
              "tf32": tf32, "fp32_matmul": fp32_matmul + (" (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE)"
                                                          if override else ""),
              "optimizer": opt_name,
              "attention": "sdpa" if model.blocks[0].attn.sdpa else "math",
              "loss": round(last_loss, 4)}
    if device == "cuda":
        record["gpu"] = torch.cuda.get_device_name(0)
        record["cuda"] = torch.version.cuda
        record["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    emit(record)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:  # a compile or CUDA failure: a row that says why, not a traceback
        import traceback
        traceback.print_exc(file=sys.stderr)
        mode = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--mode"), "eager")
        prec = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--precision"),
                    "f32")
        msg = f"{type(e).__name__}: {e}".strip().splitlines()
        print(json.dumps({"mode": mode, "precision": prec,
                          "error": (msg[0] if msg else type(e).__name__)[:300]}), flush=True)
        sys.exit(1)
