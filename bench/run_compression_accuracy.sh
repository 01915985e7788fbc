#!/usr/bin/env bash
# What compression and decentralization cost in accuracy (docs/compression.md): the Fashion-MNIST
# CNN (examples/fashion_cnn.toml), one epoch, on local workers, for several seeds; each method's
# mean test accuracy (and spread) against its uncompressed baseline with as many workers, and
# issue 13's bar for it:
#
#   2 workers, against ddp:    fp16, bf16 within 0.3 points; powersgd (rank 4), topk (1%, error
#                              feedback), local_sgd (H = 8) within 1.0 point
#   4 workers, against ddp4:   gossip (a ring of 4) within 1.0 point; its consensus distance
#                              (first and last step record) should shrink
#
#   bench/run_compression_accuracy.sh [--seeds 3] [--methods "ddp fp16 ..."] [--build-dir DIR]
#
# Accuracy does not depend on timing, so a busy machine only makes it slower.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SEEDS=3 BUILD_DIR="$ROOT/build"
METHODS="ddp fp16 bf16 powersgd topk local_sgd ddp4 gossip4"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --seeds) SEEDS="$2"; shift 2 ;;
    --methods) METHODS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_compression_accuracy: unknown option '$1'" >&2; usage ;;
  esac
done
cmake --build "$BUILD_DIR" --target cohort_cli >/dev/null
COHORT="$BUILD_DIR/bin/cohort"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# method_args METHOD: "WORKERS ARGS..."
method_args() {
  case "$1" in
    ddp) echo "2" ;;
    ddp4) echo "4" ;;
    fp16|bf16|topk) echo "2 --set ddp.compression=$1" ;;
    powersgd) echo "2 --set ddp.compression=powersgd --set ddp.powersgd_rank=4" ;;
    local_sgd) echo "2 --set parallel.strategy=local_sgd --set local_sgd.period=8" ;;
    gossip4) echo "4 --set parallel.strategy=gossip --set gossip.topology=ring" ;;
    *) echo "run_compression_accuracy: unknown method '$1'" >&2; exit 2 ;;
  esac
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "config: examples/fashion_cnn.toml, 1 epoch, seeds 0..$((SEEDS - 1))"
RESULTS="$TMP/results"
for m in $METHODS; do
  read -r workers args <<<"$(method_args "$m") "
  for s in $(seq 0 $((SEEDS - 1))); do
    name="$m.$s"
    # shellcheck disable=SC2086
    if ! "$COHORT" train "$ROOT/examples/fashion_cnn.toml" --workers "$workers" \
      --set run.threads=1 --set ckpt.enabled=false --set run.progress=none \
      --set "run.seed=$s" --set "run.dir=$TMP" --set "run.name=$name" $args \
      >"$TMP/$name.log" 2>&1; then
      echo "run_compression_accuracy: $name failed:" >&2; tail -20 "$TMP/$name.log" >&2; exit 1
    fi
    /usr/bin/python3 - "$m" "$s" "$TMP/$name/metrics.jsonl" >>"$RESULTS" <<'EOF'
import json, sys
method, seed, path = sys.argv[1:]
acc, dist = None, []
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "summary" and r.get("rank", 0) == 0:
        acc = r["eval_accuracy"]
    if r.get("event") == "step" and "consensus_distance" in r:
        dist.append(r["consensus_distance"])
d = f"{dist[0]:.4g} {dist[-1]:.4g}" if dist else "- -"
print(method, seed, acc, d)
EOF
    tail -1 "$RESULTS"
  done
done
/usr/bin/python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for m, _, acc, d0, d1 in rows:
    by.setdefault(m, []).append((100 * float(acc), d0, d1))
BASE = {"ddp4": None, "gossip4": "ddp4"}
BAR = {"fp16": 0.3, "bf16": 0.3}
print("\n| method | workers | accuracy, mean ± sd (min-max) | vs baseline | bar | consensus distance |")
print("|---|---|---|---|---|---|")
for m, runs in by.items():
    accs = [a for a, _, _ in runs]
    mean = statistics.mean(accs)
    sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
    base = BASE.get(m, "ddp") if m not in ("ddp",) else None
    vs, bar = "-", "-"
    if base in by:
        diff = mean - statistics.mean(a for a, _, _ in by[base])
        limit = BAR.get(m, 1.0)
        vs = f"{diff:+.2f} vs {base}"
        bar = f"within {limit}: {'yes' if diff >= -limit else 'NO'}"
    dist = "-" if runs[0][1] == "-" else f"{runs[0][1]} -> {runs[0][2]} (seed 0)"
    workers = 4 if m.endswith("4") else 2
    print(f"| {m} | {workers} | {mean:.2f}% ± {sd:.2f} ({min(accs):.2f}-{max(accs):.2f}) "
          f"| {vs} | {bar} | {dist} |")
EOF
