#!/usr/bin/env bash
# What in-place recovery costs ZeRO (docs/elastic.md "ZeRO"): W workers train the MLP on
# Fashion-MNIST for one epoch under ZeRO stages 1, 2 and 3, without elastic training and with
# elastic.min_workers = 2 (each rank then keeps and steps its neighbour's shard, stages 2 and 3
# allreduce instead of reduce-scattering, liveness beats), alternated, R repeats each, no
# failures. Prints each run's samples/s and model-state memory per rank (parameters, gradients,
# optimizer state, as the allocator counts them at the end), then per stage the median ratio
# elastic / plain of samples/s and the memory ratio.
#
#   bench/run_elastic_zero_cost.sh [--workers W] [--repeats R] [--busy]
# --busy: one busy process (`yes`) beside every run.
set -uo pipefail
cd "$(dirname "$0")/.."

WORKERS=4 REPEATS=3 BUSY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --busy) BUSY=1; shift ;;
    *) echo "run_elastic_zero_cost: unknown argument $1" >&2; exit 2 ;;
  esac
done
COHORT=$(realpath "${COHORT_BUILD_DIR:-build}")/bin/cohort
[ -x "$COHORT" ] || { echo "run_elastic_zero_cost: build $COHORT first" >&2; exit 1; }
OUT=$(mktemp -d)
BUSY_PID=""
trap '[ -n "$BUSY_PID" ] && kill "$BUSY_PID"; rm -rf "$OUT"' EXIT
source bench/machine_line.sh
echo "# bench/run_elastic_zero_cost.sh --workers $WORKERS --repeats $REPEATS$([ $BUSY = 1 ] && echo ' --busy');" \
  "$(machine_line /usr/bin/python3)"
if [ "$BUSY" = 1 ]; then yes >/dev/null & BUSY_PID=$!; fi

for stage in 1 2 3; do
  for rep in $(seq "$REPEATS"); do
    for min in 0 2; do
      name=zero$stage-$min-$rep
      "$COHORT" train examples/fashion_mlp.toml --workers "$WORKERS" \
        --set parallel.strategy=zero --set zero.stage=$stage --set elastic.min_workers=$min \
        --set train.epochs=1 --set run.progress=none --set ckpt.enabled=false \
        --set run.dir="$OUT" --set run.name="$name" >"$OUT/$name.log" 2>&1 ||
        { tail -5 "$OUT/$name.log"; exit 1; }
    done
  done
done
/usr/bin/python3 - "$OUT" "$REPEATS" <<'PY'
import json, os, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def summary(name):
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("event") == "summary"][-1]
def model_state(s):
    m = s["memory_bytes"]
    return m["parameters"] + m["gradients"] + m["optimizer"]
for stage in (1, 2, 3):
    speed, memory = [], []
    for rep in range(1, repeats + 1):
        runs = {m: summary(f"zero{stage}-{m}-{rep}") for m in (0, 2)}
        for m, s in runs.items():
            print(f"zero-{stage} {'elastic' if m else 'plain  '} repeat {rep}: "
                  f"{s['samples_per_s']:,.0f} samples/s, test accuracy {100 * s['eval_accuracy']:.2f}%, "
                  f"model state {model_state(s) / 2**20:.2f} MiB per rank")
        speed.append(runs[2]["samples_per_s"] / runs[0]["samples_per_s"])
        memory.append(model_state(runs[2]) / model_state(runs[0]))
    print(f"zero-{stage}: elastic / plain samples/s, median over {repeats}: "
          f"{statistics.median(speed):.2f}x; model state per rank {statistics.median(memory):.2f}x")
PY
