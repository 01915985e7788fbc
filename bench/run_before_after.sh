#!/usr/bin/env bash
# Two builds of cohort side by side in one run: a benchmark script that takes --cohort BIN and
# --json FILE (bench/run_ddp_bench.sh, bench/run_zero_bench.sh) runs once per round with the
# "before" binary and once with the "after" one, in turn, so both share the machine's noise.
# Prints, for every cohort configuration the script measured, the median samples/s of each
# build over the rounds and the ratio after/before. For a change that must not move speed
# (a refactoring), the ratio should sit within the rounds' spread, which is printed beside it.
#
#   bench/run_before_after.sh --before BIN --after BIN [--rounds R] -- SCRIPT [ARGS...]
#
# Example (the redesign of issue 32; the old binary built from an earlier commit):
#   bench/run_before_after.sh --before /tmp/old/build/bin/cohort --after build/bin/cohort \
#       --rounds 3 -- bench/run_ddp_bench.sh --model mlp
set -euo pipefail
BEFORE="" AFTER="" ROUNDS=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --before) BEFORE="$2"; shift 2 ;;
    --after) AFTER="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "run_before_after: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -x "$BEFORE" && -x "$AFTER" ]] || { echo "run_before_after: --before and --after must be cohort binaries" >&2; exit 2; }
[[ $# -ge 1 ]] || { echo "run_before_after: give the benchmark script after --" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "run_before_after: --rounds must be a positive integer" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for build in before after; do
    bin="$BEFORE"; [[ $build == after ]] && bin="$AFTER"
    echo "== round $r/$ROUNDS, $build ($bin)" >&2
    "$@" --repeats 1 --cohort "$bin" --json "$TMP/$build.$r.jsonl" > "$TMP/$build.$r.out"
  done
done
python3 - "$TMP" "$ROUNDS" <<'PY'
import glob, json, os, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
runs = {}
for build in ("before", "after"):
    for f in sorted(glob.glob(os.path.join(tmp, f"{build}.*.jsonl"))):
        for line in open(f):
            if not line.strip():
                continue
            r = json.loads(line)
            if (not str(r.get("impl", "")).startswith("cohort") or "samples_per_s" not in r
                    or r.get("rank", 0) != 0):  # one row per run (zero: one per rank)
                continue
            key = tuple((k, r[k]) for k in ("impl", "model", "stage", "workers") if k in r)
            runs.setdefault(key, {}).setdefault(build, []).append(r["samples_per_s"])
print(f"\n{'configuration':44} {'before':>10} {'after':>10} {'after/before':>13}  rounds (before | after)")
for key in sorted(runs, key=str):
    b, a = runs[key].get("before", []), runs[key].get("after", [])
    if not b or not a:
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    name = " ".join(f"{k}={v}" for k, v in key)
    spread = " ".join(f"{x:,.0f}" for x in b) + " | " + " ".join(f"{x:,.0f}" for x in a)
    print(f"{name:44} {mb:10,.0f} {ma:10,.0f} {ma / mb:12.3f}x  {spread}")
PY
