#!/usr/bin/env bash
# What elastic.exact costs (docs/elastic.md "The global batch stays fixed, and the exact mode"):
# W workers train the MLP and the CNN on Fashion-MNIST for one epoch with elastic.min_workers =
# 2, the fixed global batch's DDP (allreduce overlapped with backward) beside the exact mode
# (each slot's backward apart, then the ordered mean), alternated, R repeats each, no failures.
# Prints each run's samples/s, test accuracy and exposed communication per step, then the
# median ratio exact / DDP per model.
#
#   bench/run_elastic_exact_cost.sh [--workers W] [--repeats R] [--busy]
# --busy: one busy process (`yes`) beside every run.
set -uo pipefail
cd "$(dirname "$0")/.."

WORKERS=4 REPEATS=2 BUSY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --busy) BUSY=1; shift ;;
    *) echo "run_elastic_exact_cost: unknown argument $1" >&2; exit 2 ;;
  esac
done
COHORT=$(realpath "${COHORT_BUILD_DIR:-build}")/bin/cohort
[ -x "$COHORT" ] || { echo "run_elastic_exact_cost: build $COHORT first" >&2; exit 1; }
OUT=$(mktemp -d)
BUSY_PID=""
trap '[ -n "$BUSY_PID" ] && kill "$BUSY_PID"; rm -rf "$OUT"' EXIT
source bench/machine_line.sh
echo "# bench/run_elastic_exact_cost.sh --workers $WORKERS --repeats $REPEATS$([ $BUSY = 1 ] && echo ' --busy');" \
  "$(machine_line /usr/bin/python3)"
if [ "$BUSY" = 1 ]; then yes >/dev/null & BUSY_PID=$!; fi

for model in mlp cnn; do
  for rep in $(seq "$REPEATS"); do
    for exact in false true; do
      name=$model-$exact-$rep
      "$COHORT" train "examples/fashion_$model.toml" --workers "$WORKERS" \
        --set elastic.min_workers=2 --set elastic.exact=$exact --set train.epochs=1 \
        --set run.progress=none --set ckpt.enabled=false --set run.dir="$OUT" \
        --set run.name="$name" >"$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log"; exit 1; }
    done
  done
done
/usr/bin/python3 - "$OUT" "$REPEATS" <<'PY'
import json, os, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def summary(name):
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("event") == "summary"][-1]
for model in ("mlp", "cnn"):
    ratios = []
    for rep in range(1, repeats + 1):
        runs = {e: summary(f"{model}-{e}-{rep}") for e in ("false", "true")}
        for e, s in runs.items():
            print(f"{model} {'exact' if e == 'true' else 'ddp  '} repeat {rep}: "
                  f"{s['samples_per_s']:,.0f} samples/s, test accuracy {100 * s['eval_accuracy']:.2f}%, "
                  f"exposed communication {s['exposed_comm_ms']:.2f} ms/step")
        ratios.append(runs["true"]["samples_per_s"] / runs["false"]["samples_per_s"])
    print(f"{model}: exact / ddp samples/s, median over {repeats}: {statistics.median(ratios):.2f}x")
PY
