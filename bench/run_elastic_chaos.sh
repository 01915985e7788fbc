#!/usr/bin/env bash
# Chaos (issue 36, docs/elastic.md): W workers train the CNN on Fashion-MNIST for E epochs twice,
# with in-place recovery and --respawn: once quietly, once while a random worker other than rank 0
# is killed with SIGKILL every S seconds (the launcher respawns it and the job admits it again).
# Both runs train the same samples (whole epochs), so goodput (samples that reach the final model
# per second of wall time) compares as the ratio of the wall times. Prints both runs' wall time,
# the kills, the membership changes, the goodput ratio and the accuracy difference, against the
# goals (goodput >= 95% of the quiet run's, accuracy within 0.3 points).
#
#   bench/run_elastic_chaos.sh [--workers W] [--epochs E] [--every S] [--model cnn|mlp] [--smoke]
# --smoke: the MLP, 3 workers, 3 epochs, a kill every 4 s (a check of the script, not a
# measurement).
set -uo pipefail
cd "$(dirname "$0")/.."

WORKERS=4 EPOCHS=2 EVERY=30 MODEL=cnn SEED=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --smoke) WORKERS=3 EPOCHS=3 EVERY=4 MODEL=mlp; shift ;;
    *) echo "run_elastic_chaos: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD=$(realpath "${COHORT_BUILD_DIR:-build}")
COHORT=$BUILD/bin/cohort
[ -x "$COHORT" ] || { echo "run_elastic_chaos: build $COHORT first" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
source bench/machine_line.sh
echo "# bench/run_elastic_chaos.sh --workers $WORKERS --epochs $EPOCHS --every $EVERY" \
  "--model $MODEL --seed $SEED; $(machine_line /usr/bin/python3)"

# One run; NAME is also its run directory. Prints its wall seconds.
train() {
  local name=$1 start end
  start=$(date +%s.%N)
  "$COHORT" train "examples/fashion_$MODEL.toml" --workers "$WORKERS" --respawn \
    --set elastic.min_workers=2 --set train.epochs="$EPOCHS" --set run.seed="$SEED" \
    --set run.progress=none --set ckpt.enabled=false --set run.dir="$OUT" \
    --set run.name="$name" >"$OUT/$name.log" 2>&1 || {
      tail -5 "$OUT/$name.log" >&2; echo failed; return; }
  end=$(date +%s.%N)
  /usr/bin/python3 -c "print(f'{$end - $start:.1f}')"
}

# Kills a random worker of run NAME other than rank 0, every EVERY seconds once training has
# started (in-place recovery covers the training loop, not start-up), while it runs.
killer() {
  local name=$1 pids rank victims
  until grep -qs '"event":"step"' "$OUT/$name/metrics.jsonl"; do sleep 0.1; done
  while sleep "$EVERY"; do
    victims=()
    for p in $(pgrep -f "run.name=$name"); do
      rank=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^COHORT_RANK=//p')
      [ -n "$rank" ] && [ "$rank" != 0 ] && victims+=("$p")
    done
    [ ${#victims[@]} -eq 0 ] && continue
    p=${victims[$((RANDOM % ${#victims[@]}))]}
    kill -9 "$p" 2>/dev/null && echo kill >>"$OUT/kills"
  done
}

quiet=$(train quiet)
touch "$OUT/kills"
killer chaos & KILLER=$!
chaos=$(train chaos)
kill "$KILLER" 2>/dev/null
wait "$KILLER" 2>/dev/null
kills=$(wc -l <"$OUT/kills")
[ "$quiet" = failed ] || [ "$chaos" = failed ] && { echo "a run failed"; exit 1; }
/usr/bin/python3 - "$OUT" "$quiet" "$chaos" "$kills" <<'PY'
import json, os, sys
out, quiet, chaos, kills = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
def records(name, event):
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("event") == event]
def accuracy(name):
    return 100 * records(name, "summary")[-1]["eval_accuracy"]
changes = records("chaos", "membership")
recover = sorted(c["recover_s"] for c in changes)
median = recover[len(recover) // 2] if recover else float("nan")
goodput = quiet / chaos
dacc = accuracy("chaos") - accuracy("quiet")
print(f"quiet: {quiet:.1f} s, test accuracy {accuracy('quiet'):.2f}%")
print(f"chaos: {chaos:.1f} s, test accuracy {accuracy('chaos'):.2f}%, {kills} kill(s), "
      f"{len(changes)} membership change(s), recovery median {median:.3f} s")
print(f"goodput {100 * goodput:.1f}% of the quiet run's (goal >= 95%) "
      f"{'PASS' if goodput >= 0.95 else 'FAIL'}; accuracy {dacc:+.2f} points "
      f"(goal within 0.3) {'PASS' if abs(dacc) <= 0.3 else 'FAIL'}")
PY
