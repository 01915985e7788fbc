"""bench/run_gpu_gpt.sh's arithmetic: one JSON row per run, then the markdown table. Standard
library only (the GPU machine's python3 and Debian's both run it).

  gpu_gpt_report.py row --name NAME --precision P [--status S --reason R]
                        [--torch-out FILE | --cohort-metrics FILE --warmup W] --log FILE
                        --rc RC --timeout S --shape L,H,C,T,B
      prints one row: the peer's JSON line, or the median step of cohort's metrics.jsonl, or a
      row that says why there is no number (skipped, not built, refused, failed, out of time)
  gpu_gpt_report.py table --rows FILE --gpu NAME [--info KEY=VALUE ...]
      prints the markdown report: the machine, one line per row, the cohort / PyTorch ratios

MFU (PaLM's appendix B, nanoGPT's estimate_mfu): model FLOPs per token are
  6 N + 12 n_layer n_embd T
with N the parameters less the two embedding tables (wte and wpe are lookups, not matmuls; the
untied lm_head is a matmul and counts), T the context; the attention term counts the full T x T
scores, not the causal half, as PaLM does. MFU = tokens/s x FLOPs per token / the GPU's dense
peak for the row's precision (PEAKS). Recomputation is not counted: these are model FLOPs.
"""
import argparse
import json
import statistics
import sys

# Dense (no 2:4 sparsity) tensor-core peaks in TFLOP/s from NVIDIA's datasheets, which print
# the sparse figure for TF32 and BF16: half of it, rounded down, is the dense one. FP32 is the CUDA cores'
# (no tensor cores): what an f32 row gets with TF32 off, as cohort's f32 and the peer's f32 by
# default. H100 SXM and H200 SXM: FP32 67, TF32 989*, BF16 1,979* (H100 datasheet, H200
# datasheet); H200 NVL: 60, 835*, 1,671*; H100 PCIe: 51, 756*, 1,513*; H100 NVL: 60, 835*,
# 1,671*; A100 (SXM and PCIe): 19.5, 312*, 624* (* with sparsity). First match wins.
PEAKS = [  # (substring of nvidia-smi's name, {precision: dense TFLOP/s})
    ("H200 NVL", {"fp32": 60, "tf32": 417, "bf16": 835}),
    ("H200", {"fp32": 67, "tf32": 494, "bf16": 989}),
    ("H100 PCIe", {"fp32": 51, "tf32": 378, "bf16": 756}),
    ("H100 NVL", {"fp32": 60, "tf32": 417, "bf16": 835}),
    ("H100", {"fp32": 67, "tf32": 494, "bf16": 989}),  # SXM: "NVIDIA H100 80GB HBM3"
    ("A100", {"fp32": 19.5, "tf32": 156, "bf16": 312}),
]
VOCAB = 256
NAMES = ["cohort", "PyTorch eager", "PyTorch compile"]


def shape_of(text):
    L, H, C, T, B = (int(v) for v in text.split(","))
    return dict(n_layer=L, n_head=H, n_embd=C, block_size=T, batch=B)


def last_line(path, default=""):
    """The last non-empty line of a log (the error a run ended with), shortened."""
    try:
        lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    except OSError:
        return default
    return (lines[-1] if lines else default)[:240]


def failure(a, what):
    """A run that gave no number: timed out, or exited non-zero, with its last log line."""
    if a.rc in (124, 137):
        return {"status": "failed", "reason": f"timed out after {a.timeout} s ({what})"}
    return {"status": "failed", "reason": f"exit {a.rc}: {last_line(a.log, 'no output')}"}


def torch_row(a):
    try:
        lines = [l for l in open(a.torch_out) if l.strip().startswith("{")]
        r = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        return failure(a, "no JSON line")
    if "skipped" in r:
        r.update(status="skipped", reason=r.pop("skipped"))
    elif "error" in r:
        r.update(status="failed", reason=r.pop("error"))
        if a.rc in (124, 137):
            r["reason"] = f"timed out after {a.timeout} s"
    else:
        r["status"] = "ok"
    return r


def cohort_row(a, shape):
    """The median of the step times in cohort's metrics.jsonl (run.log_every = 1): a step's
    time is the difference of consecutive step events' time_s (seconds since the start,
    evaluations excluded by train.eval_every = 0). cohort reads each step's loss on the host, so
    a step ends synchronised with the GPU. The first --warmup steps (allocation, cuBLASLt's
    algorithm choice) are left out."""
    try:
        events = [json.loads(l) for l in open(a.cohort_metrics) if l.strip()]
    except (OSError, ValueError):
        return failure(a, "no metrics.jsonl")
    start = next((e for e in events if e.get("event") == "start"), {})
    steps = sorted((e["step"], e["time_s"]) for e in events if e.get("event") == "step")
    if len(steps) < 2:
        r = failure(a, f"{len(steps)} step(s) logged")
        if a.rc == 0:
            r["reason"] = f"only {len(steps)} step(s) logged: too few to time one"
        return r
    warmup = min(a.warmup, len(steps) - 1)  # a time limit may have cut the run short
    times = [t1 - t0 for (s0, t0), (s1, t1) in zip(steps, steps[1:]) if s1 == s0 + 1 and s0 >= warmup]
    if not times:
        return failure(a, "no consecutive steps logged")
    median = statistics.median(times)
    r = {"status": "ok", "ms_per_step_median": round(median * 1e3, 3),
         "ms_per_step_mean": round(statistics.fmean(times) * 1e3, 3),
         "tokens_per_s": round(shape["batch"] * shape["block_size"] / median, 1),
         "steps_timed": len(times), "warmup": warmup, "params": start.get("parameters"),
         "tf32": False,  # cohort/kernels/cuda/matmul.h: MatmulOptions::allow_tf32 = false
         "first_step_s": round(steps[0][1], 2)}
    summary = next((e for e in reversed(events) if e.get("event") == "summary"), {})
    if summary.get("device_memory_peak_bytes"):  # the caching allocator's peak in use
        r["peak_memory_gib"] = round(summary["device_memory_peak_bytes"] / 2**30, 2)
    if warmup < a.warmup:
        r["note"] = f"the time limit cut the run: {warmup} warmup step(s), not {a.warmup}"
    if a.rc != 0:
        r["note"] = f"exit {a.rc} after its steps: {last_line(a.log)}"
    return r


def make_row(a):
    shape = shape_of(a.shape)
    if a.status:
        r = {"status": a.status, "reason": a.reason}
    elif a.torch_out:
        r = torch_row(a)
    else:
        r = cohort_row(a, shape)
    r.update(name=a.name, precision=a.precision, **shape)
    print(json.dumps(r))


def peak_tflops(gpu, precision, measured=None):
    """The measured peak for the precision where bench/torch_matmul_peak.py gave one (TF32 is
    not measured: the datasheet's), else the datasheet's."""
    if measured and measured.get(precision):
        return measured[precision]
    for key, peaks in PEAKS:
        if key in gpu:
            return peaks[precision]
    return None


def measured_peaks(path):
    if not path:
        return None
    try:
        peaks = json.loads(open(path).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None if "skipped" in peaks else peaks


def flops_per_token(r):
    L, C, T = r["n_layer"], r["n_embd"], r["block_size"]
    n = r["params"] - (VOCAB + T) * C  # less wte and wpe
    return 6 * n + 12 * L * C * T


def fmt(v, digits=0):
    return "" if v is None else f"{v:,.{digits}f}"


def table(a):
    rows = [json.loads(l) for l in open(a.rows) if l.strip()]
    measured = measured_peaks(a.peaks)
    info = dict(kv.split("=", 1) for kv in a.info)
    out = ["# GPT-2 small training: cohort vs PyTorch, one GPU", ""]
    for k, v in info.items():
        out.append(f"- {k}: {v}")
    if rows:
        r0 = rows[0]
        out.append(f"- shape: {r0['n_layer']} layers, {r0['n_head']} heads, width {r0['n_embd']}, "
                   f"context {r0['block_size']}, batch {r0['batch']} "
                   f"({r0['batch'] * r0['block_size']:,} tokens a step), byte vocabulary {VOCAB}")
    out += ["", "| framework | precision | median ms/step | tokens/s | MFU | steps timed | "
            "first step s | notes |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"| {r['name']} | {r['precision']} | | | | | | {r['status']}: "
                       f"{r.get('reason', '')} |")
            continue
        prec = "tf32" if r["precision"] == "f32" and r.get("tf32") else \
            ("fp32" if r["precision"] == "f32" else "bf16")
        peak = peak_tflops(a.gpu, prec, measured)
        if r.get("params"):
            r["mfu"] = r["tokens_per_s"] * flops_per_token(r) / (peak * 1e12) if peak else None
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
        notes = [f"{r['params']:,} parameters"] if r.get("params") else []
        notes += [f"{k} {r[k]}" for k in ("optimizer", "attention", "fp32_matmul", "loss",
                                          "peak_memory_gib", "note") if r.get(k, "n/a") != "n/a"]
        out.append(f"| {r['name']} | {r['precision']}{' (TF32)' if prec == 'tf32' else ''} | "
                   f"{fmt(r['ms_per_step_median'], 1)} | {fmt(r['tokens_per_s'])} | {mfu} | "
                   f"{r['steps_timed']} | {fmt(r.get('first_step_s'), 1)} | {'; '.join(notes)} |")
    ok = {(r["name"], r["precision"]): r for r in rows if r["status"] == "ok"}
    out += ["", "| tokens/s ratio | cohort | PyTorch | cohort / PyTorch |", "|---|---|---|---|"]
    for prec in ("f32", "bf16"):
        c = ok.get(("cohort", prec))
        for peer in NAMES[1:]:
            p = ok.get((peer, prec))
            ratio = f"{c['tokens_per_s'] / p['tokens_per_s']:.2f}" if c and p else "n/a"
            out.append(f"| cohort / {peer}, {prec} | {fmt(c and c['tokens_per_s'])} | "
                       f"{fmt(p and p['tokens_per_s'])} | {ratio} |")
    peaks = next((p for k, p in PEAKS if k in a.gpu), None)
    out += ["", "MFU = tokens/s x (6 N + 12 n_layer n_embd T) / peak, N = parameters less the "
            "embedding tables (bench/gpu_gpt_report.py); peak: "
            + (f"measured in this run, an {measured['n']}^3 torch.matmul: {measured['bf16']} "
               f"TFLOP/s bf16, {measured['fp32']} FP32 (bench/torch_matmul_peak.py); "
               if measured else "")
            + (f"NVIDIA's datasheet for {a.gpu}: {peaks['bf16']} TFLOP/s dense bf16, "
               f"{peaks['tf32']} TF32, {peaks['fp32']} FP32"
               + (" (used only for TF32)" if measured else "") if peaks else
               ("no GPU, so no MFU" if a.gpu == "none" and not measured
                else f"no datasheet figures for '{a.gpu}'")) + "."]
    if any(r.get("tf32") for r in rows if r["status"] == "ok"):
        out.append("PyTorch's f32 rows ran on TF32 tensor cores (--tf32), against the TF32 peak; "
                   "cohort's f32 products are true f32, against the FP32 peak.")
    else:
        out.append("f32 rows: true f32 products (TF32 off) on both sides, against the FP32 peak.")
    out.append("bf16 rows, against the bf16 peak: PyTorch's torch.autocast (bf16 activations "
               "and attention, f32 master weights); cohort's train.precision = bf16 rounds the "
               "operands of every linear and matmul to bf16 with f32 accumulation, its "
               "activations, attention and master weights stay f32 (docs/gpu.md).")
    print("\n".join(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("row")
    r.add_argument("--name", required=True)
    r.add_argument("--precision", required=True)
    r.add_argument("--status", default="")
    r.add_argument("--reason", default="")
    r.add_argument("--torch-out", default="")
    r.add_argument("--cohort-metrics", default="")
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--log", default="")
    r.add_argument("--rc", type=int, default=0)
    r.add_argument("--timeout", default="?")
    r.add_argument("--shape", required=True, help="n_layer,n_head,n_embd,block_size,batch")
    t = sub.add_parser("table")
    t.add_argument("--rows", required=True)
    t.add_argument("--gpu", default="none")
    t.add_argument("--info", action="append", default=[])
    t.add_argument("--peaks", default="", help="bench/torch_matmul_peak.py's output")
    a = p.parse_args()
    make_row(a) if a.cmd == "row" else table(a)


if __name__ == "__main__":
    sys.exit(main())
