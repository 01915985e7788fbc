#!/usr/bin/python3
"""The tables of bench/run_torch_backend_bench.sh from its runs' outputs in DIR.

  ddp.jsonl          one JSON line per DDP run (impl cohort|gloo, model, samples_per_s, repeat)
  ar.TOOL.REPEAT     a sweep table (size count type time algbw busbw #wrong ...) of TOOL:
                     plugin, gloo, native (cohort bench collectives), native-heap

Medians over the repeats; ratios of the medians; each goal of issue 34 with PASS/FAIL. A wrong
allreduce result (#wrong != 0) exits 1.

  /usr/bin/python3 bench/torch_backend_report.py DIR ddp|allreduce|all REPEATS
"""
import glob
import json
import os
import statistics
import sys

TOOLS = ("plugin", "gloo", "native", "native-heap")
failed = 0


def goal(text, value, want, fmt="{:.2f}x"):
    global failed
    if value is None:
        print(f"  {text}: n/a")
        return
    ok = value >= want
    failed += not ok
    print(f"  {text}: {fmt.format(value)} (goal >= {fmt.format(want)}) {'PASS' if ok else 'FAIL'}")


def med(xs):
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def f(v, spec):
    return format(v, spec) if v is not None else "-"


def label(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1 << 10 else str(b)


def ddp(out, repeats):
    rows = [json.loads(l) for l in open(os.path.join(out, "ddp.jsonl")) if l.strip()]
    models = [m for m in ("mlp", "cnn") if any(r["model"] == m for r in rows)]
    print(f"\n## PyTorch DDP, 2 ranks x 1 thread, batch 64 per rank: samples/s (both ranks), "
          f"median of {repeats}")
    print("%-6s %12s %12s %14s   %s" % ("model", "cohort", "gloo", "cohort/gloo", "runs cohort | gloo"))
    meds = {}
    for m in models:
        v = {b: [r["samples_per_s"] for r in rows if r["model"] == m and r["impl"] == b]
             for b in ("cohort", "gloo")}
        meds[m] = {b: med(x) for b, x in v.items()}
        print("%-6s %12s %12s %14s   %s | %s" % (
            m, f(meds[m]["cohort"], ",.0f"), f(meds[m]["gloo"], ",.0f"),
            f(ratio(meds[m]["cohort"], meds[m]["gloo"]), ".2f"),
            " ".join("%.0f" % x for x in v["cohort"]), " ".join("%.0f" % x for x in v["gloo"])))
    print("goals:")
    for m, want in (("mlp", 2.0), ("cnn", 1.0)):
        if m in meds:
            goal(f"{m}: cohort/gloo samples/s", ratio(meds[m]["cohort"], meds[m]["gloo"]), want)


def load(out, tool):
    rows = {}  # size -> [(time_us, busbw)] over repeats
    for path in sorted(glob.glob(os.path.join(out, f"ar.{tool}.*"))):
        if path.endswith(".out"):
            continue
        for line in open(path):
            x = line.split()
            if len(x) >= 7 and x[0].isdigit():
                if int(x[6]):
                    sys.exit(f"torch_backend_report: {tool}: {x[6]} wrong results at {x[0]} B")
                rows.setdefault(int(x[0]), []).append((float(x[3]), float(x[5])))
    return rows


def allreduce(out, repeats):
    t = {tool: load(out, tool) for tool in TOOLS}
    sizes = sorted(t["plugin"])
    m = {tool: {s: (med([r[0] for r in t[tool].get(s, [])]), med([r[1] for r in t[tool].get(s, [])]))
                for s in sizes} for tool in TOOLS}
    us = lambda tool, s: m[tool][s][0]  # noqa: E731
    bw = lambda tool, s: m[tool][s][1]  # noqa: E731
    print(f"\n## all_reduce f32 sum, 2 ranks: median time per call (us; slowest rank) over "
          f"iterations, then median of {repeats} sweeps")
    print("%6s %10s %10s %10s %11s %11s %13s %13s" % (
        "size", "plugin", "gloo", "native", "native-heap", "gloo/plugin", "plugin-native",
        "plugin-heap"))
    for s in sizes:
        print("%6s %10s %10s %10s %11s %11s %13s %13s" % (
            label(s), f(us("plugin", s), ".1f"), f(us("gloo", s), ".1f"), f(us("native", s), ".1f"),
            f(us("native-heap", s), ".1f"), f(ratio(us("gloo", s), us("plugin", s)), ".1f"),
            f(us("plugin", s) - us("native", s) if us("native", s) else None, ".1f"),
            f(us("plugin", s) - us("native-heap", s) if us("native-heap", s) else None, ".1f")))
    print("\n## the same runs: busbw (GB/s)")
    print("%6s %10s %10s %10s %11s %11s %13s %13s" % (
        "size", "plugin", "gloo", "native", "native-heap", "plugin/gloo", "native/plugin",
        "heap/plugin"))
    for s in sizes:
        print("%6s %10s %10s %10s %11s %11s %13s %13s" % (
            label(s), f(bw("plugin", s), ".3f"), f(bw("gloo", s), ".3f"), f(bw("native", s), ".3f"),
            f(bw("native-heap", s), ".3f"), f(ratio(bw("plugin", s), bw("gloo", s)), ".1f"),
            f(ratio(bw("native", s), bw("plugin", s)), ".2f"),
            f(ratio(bw("native-heap", s), bw("plugin", s)), ".2f")))
    small = [s for s in sizes if s < 1 << 20 and us("native", s) is not None]
    if small:
        cost = [us("plugin", s) - us("native", s) for s in small]
        heap = [us("plugin", s) - us("native-heap", s) for s in small if us("native-heap", s)]
        print(f"\ntorch layer per call below 1 MiB (plugin time minus cohort's own, sizes "
              f"{label(small[0])}..{label(small[-1])}): median {med(cost):.1f} us against native "
              f"(range {min(cost):.1f}..{max(cost):.1f}), {f(med(heap), '.1f')} us against native-heap")
    print("goals:")
    if 4096 in sizes:
        goal("4K: gloo/plugin time per call", ratio(us("gloo", 4096), us("plugin", 4096)), 20.0)
    for s in sizes:
        if 1 << 20 <= s <= 16 << 20:
            goal(f"{label(s)}: plugin/gloo busbw", ratio(bw("plugin", s), bw("gloo", s)), 5.0)
    for s in sizes:  # "within 1.5x of cohort's own": plugin busbw >= native / 1.5
        if s >= 1 << 20:
            goal(f"{label(s)}: plugin busbw / native (shared buffers)",
                 ratio(bw("plugin", s), bw("native", s)), 1 / 1.5, "{:.2f}")


def main():
    out, part, repeats = sys.argv[1], sys.argv[2], sys.argv[3]
    print("".join(open(os.path.join(out, "header")).readlines()), end="")
    if part in ("ddp", "all"):
        ddp(out, repeats)
    if part in ("allreduce", "all"):
        allreduce(out, repeats)
    print(f"\n{failed} goal(s) not met" if failed else "\nall goals met")


if __name__ == "__main__":
    main()
