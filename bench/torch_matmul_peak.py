"""The GPU's matmul peak measured in the same run as bench/run_gpu_gpt.sh's rows, for its MFU
column (issue 33 asks for the peak measured, not only the datasheet's): square products through
torch.matmul in bf16 and in true f32 (TF32 off), the median of timed repetitions after warm-up.
Prints one JSON line {"bf16": TFLOP/s, "fp32": TFLOP/s, "n": ...}; without CUDA, {"skipped": why}.

    python3 bench/torch_matmul_peak.py [--n 8192] [--reps 10]
"""
import argparse
import json
import statistics
import sys


def tflops(torch, n, dtype, reps):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):  # cuBLAS picks and loads its kernel
        a @ b
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * n ** 3 / statistics.median(times) / 1e12


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"skipped": f"no torch: {e}"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 rows are true f32 on both sides
    print(json.dumps({"n": a.n, "bf16": round(tflops(torch, a.n, torch.bfloat16, a.reps), 1),
                      "fp32": round(tflops(torch, a.n, torch.float32, a.reps), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
