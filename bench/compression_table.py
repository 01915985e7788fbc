#!/usr/bin/python3
"""The tables of bench/run_compression_bench.sh from its result lines.

Each line: RATE METHOD WALL_S TIME_TO_TARGET_S SAMPLES_PER_S ACCURACY ("-" where not
measured). Per rate: medians over the runs, each method's time to target against ddp's, and
cohort against the PyTorch peer (samples/s ratio, accuracy difference in points).

  /usr/bin/python3 bench/compression_table.py RESULTS TARGET
"""
import statistics
import sys

PEERS = (("powersgd", "torch_powersgd"), ("fp16", "torch_fp16"), ("ddp", "torch_ddp"))


def median(values):
    xs = [float(x) for x in values if x != "-"]
    return statistics.median(xs) if xs else None


def fmt(x, f="%.1f"):
    return "-" if x is None else f % x


def rate_table(rate, by, target):
    print(f"\n{rate}: medians over runs (time to {target}: runs that reached it / runs)")
    print("| method | wall s | time to target, s | vs ddp | samples/s | accuracy (min-max) |")
    print("|---|---|---|---|---|---|")
    base = median(x[1] for x in by.get("ddp", []))
    for method, runs in by.items():
        tt = median(x[1] for x in runs)
        reached = sum(x[1] != "-" for x in runs)
        accs = [100 * float(x[3]) for x in runs]
        vs = fmt(base / tt, "%.2fx") if base and tt else "-"
        print(f"| {method} | {fmt(median(x[0] for x in runs))} | {fmt(tt)} ({reached}/"
              f"{len(runs)}) | {vs} | {fmt(median(x[2] for x in runs), '%.0f')} | "
              f"{statistics.median(accs):.2f}% ({min(accs):.2f}-{max(accs):.2f}) |")
    for ours, peer in PEERS:
        if ours in by and peer in by:
            speed = median(x[2] for x in by[ours]) / median(x[2] for x in by[peer])
            points = 100 * (median(x[3] for x in by[ours]) - median(x[3] for x in by[peer]))
            print(f"{ours} vs {peer}: {speed:.2f}x samples/s, accuracy {points:+.2f} points")


def main():
    rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
    for rate in dict.fromkeys(r[0] for r in rows):
        by = {}
        for r in rows:
            if r[0] == rate:
                by.setdefault(r[1], []).append(r[2:])
        rate_table(rate, by, sys.argv[2])


if __name__ == "__main__":
    main()
