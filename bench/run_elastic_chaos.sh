#!/usr/bin/env bash
# Chaos (issue 36, docs/elastic.md): W workers train the CNN on Fashion-MNIST for E epochs twice
# per seed, with in-place recovery and --respawn: once quietly, once while a random worker other
# than rank 0 is killed with SIGKILL every S seconds (the launcher respawns it and the job admits
# it again). Both runs train the same samples (whole epochs, the global batch fixed), so goodput
# (samples that reach the final model per second of wall time) compares as the ratio of the wall
# times. Prints, per seed, both runs' wall time, the kills, the membership changes, the goodput
# ratio and the accuracy difference, then their means against the goals (goodput >= 95% of the
# quiet run's, accuracy within 0.3 points); with --exact (elastic.exact = true) also whether the
# chaos run's final weights are byte-identical to the quiet run's.
#
#   bench/run_elastic_chaos.sh [--workers W] [--epochs E] [--every S] [--model cnn|mlp]
#                              [--seeds "0 1 2"] [--exact] [--smoke]
# --smoke: the MLP, 3 workers, 3 epochs, a kill every 4 s, one seed (a check of the script, not
# a measurement).
set -uo pipefail
cd "$(dirname "$0")/.."

WORKERS=4 EPOCHS=2 EVERY=30 MODEL=cnn SEEDS=0 EXACT=false
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --seed|--seeds) SEEDS=$2; shift 2 ;;
    --exact) EXACT=true; shift ;;
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
  "--model $MODEL --seeds \"$SEEDS\"$([ $EXACT = true ] && echo ' --exact');" \
  "$(machine_line /usr/bin/python3)"

# One run; NAME is also its run directory. Prints its wall seconds. Checkpoints only with
# --exact (the final weights are compared).
train() {
  local name=$1 seed=$2 start end
  start=$(date +%s.%N)
  "$COHORT" train "examples/fashion_$MODEL.toml" --workers "$WORKERS" --respawn \
    --set elastic.min_workers=2 --set elastic.exact="$EXACT" --set train.epochs="$EPOCHS" \
    --set run.seed="$seed" --set run.progress=none --set ckpt.enabled="$EXACT" --set run.dir="$OUT" \
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

# Both runs of one seed; appends their figures to $OUT/rows.
one_seed() {
  local seed=$1 quiet chaos kills
  : >"$OUT/kills"
  quiet=$(train "quiet$seed" "$seed")
  killer "chaos$seed" & KILLER=$!
  chaos=$(train "chaos$seed" "$seed")
  kill "$KILLER" 2>/dev/null
  wait "$KILLER" 2>/dev/null
  kills=$(wc -l <"$OUT/kills")
  [ "$quiet" = failed ] || [ "$chaos" = failed ] && { echo "seed $seed: a run failed"; exit 1; }
  echo "$seed $quiet $chaos $kills" >>"$OUT/rows"
}

for seed in $SEEDS; do one_seed "$seed"; done
/usr/bin/python3 - "$OUT" "$EXACT" <<'PY'
import glob, json, os, statistics, sys
out, exact = sys.argv[1], sys.argv[2] == "true"
def records(name, event):
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("event") == event]
def accuracy(name):
    return 100 * records(name, "summary")[-1]["eval_accuracy"]
def final_weights(name):
    steps = sorted(glob.glob(os.path.join(out, name, "checkpoints", "step-*")))
    with open(os.path.join(steps[-1], "model.safetensors"), "rb") as f:
        return f.read()
goodputs, daccs, identical = [], [], []
for line in open(os.path.join(out, "rows")):
    seed, quiet, chaos, kills = line.split()
    quiet, chaos = float(quiet), float(chaos)
    q, c = "quiet" + seed, "chaos" + seed
    changes = records(c, "membership")
    recover = sorted(x["recover_s"] for x in changes)
    median = recover[len(recover) // 2] if recover else float("nan")
    goodputs.append(quiet / chaos)
    daccs.append(accuracy(c) - accuracy(q))
    same = ""
    if exact:
        identical.append(final_weights(q) == final_weights(c))
        same = f"; final weights {'byte-identical' if identical[-1] else 'DIFFER'}"
    print(f"seed {seed}: quiet {quiet:.1f} s, test accuracy {accuracy(q):.2f}%; chaos {chaos:.1f} s, "
          f"test accuracy {accuracy(c):.2f}%, {kills} kill(s), {len(changes)} membership "
          f"change(s), recovery median {median:.3f} s; goodput {100 * goodputs[-1]:.1f}%{same}")
goodput, dacc = statistics.mean(goodputs), statistics.mean(daccs)
print(f"mean over {len(goodputs)} seed(s): goodput {100 * goodput:.1f}% of the quiet run's "
      f"(goal >= 95%) {'PASS' if goodput >= 0.95 else 'FAIL'}; accuracy {dacc:+.2f} points "
      f"(goal within 0.3) {'PASS' if abs(dacc) <= 0.3 else 'FAIL'}")
if exact:
    print(f"exact: final weights byte-identical in {sum(identical)} of {len(identical)} seed(s) "
          f"{'PASS' if all(identical) else 'FAIL'}")
PY
